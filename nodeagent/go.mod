module berth.dev/nodeagent

go 1.26.0
