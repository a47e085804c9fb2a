// Command berth-core is Berth's Core server:
//
//	berth-core serve [flags]                  run Core (core/daemon); serve --help lists the flags and their defaults
//	berth-core migrate --database-url URL     apply the embedded migrations
//	berth-core version                        print the version and schema version
//
// serve's flags fill daemon.Config and take every default from
// core/daemon's defaults.go. The database URL may also come from
// BERTH_DATABASE_URL, which keeps a password off the command line (and out
// of ps). berth-core never prints the URL.
package main
