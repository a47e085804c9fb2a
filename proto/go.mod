module berth.dev/proto

go 1.26
