module berth.dev/core

go 1.26.0
