module berth.dev/sandbox

go 1.26.0

replace berth.dev/runtimebootstrap => ../runtimebootstrap

require (
	berth.dev/runtimebootstrap v0.0.0
	github.com/google/uuid v1.6.0
	github.com/moby/profiles/seccomp v0.2.3
	github.com/opencontainers/runtime-spec v1.2.1
)

require golang.org/x/sys v0.33.0 // indirect
