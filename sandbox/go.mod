module berth.dev/sandbox

go 1.26
