module berth.dev/test

go 1.26.0
