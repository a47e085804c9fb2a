module berth.dev/runtimebootstrap

go 1.26
