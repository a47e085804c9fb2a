// Command berth-core is Berth's Core server:
//
//	berth-core serve [flags]                run Core (core/daemon; serve --help lists the flags)
//	berth-core migrate --database-url URL   apply the embedded migrations
//	berth-core version                      print the version and schema version
//
// The URL may also come from BERTH_DATABASE_URL, which keeps a password off
// the command line (and out of ps). berth-core never prints the URL.
package main
