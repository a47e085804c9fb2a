module berth.dev/nodeagent

go 1.26.0

replace (
	berth.dev/proto => ../proto
	berth.dev/runtimebootstrap => ../runtimebootstrap
	berth.dev/sandbox => ../sandbox
)
