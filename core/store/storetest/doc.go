// Package storetest gives each test its own freshly migrated PostgreSQL
// database on the test server (testenv.DatabaseURL), so store tests run in
// parallel without seeing each other's rows.
//
// Rules:
//   - A database is created per test as berth_test_<random> and dropped
//     (forcibly) when the test ends; at most maxDatabases exist at once per
//     test process, and every administrative step has a deadline.
//   - CREATE and DROP DATABASE take an identifier, which sqlc cannot
//     parameterize; they are the only SQL outside .sql files, and they live
//     here, in test-only code, with the name quoted by pgx.
//   - Connection URLs may carry passwords: they are never logged or put in
//     a failure message.
package storetest
