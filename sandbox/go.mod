module berth.dev/sandbox

go 1.26.0

replace berth.dev/runtimebootstrap => ../runtimebootstrap

require (
	berth.dev/runtimebootstrap v0.0.0
	github.com/google/uuid v1.6.0
)
