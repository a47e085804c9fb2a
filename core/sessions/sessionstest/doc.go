// Package sessionstest gives the Session tests (the logic's and the admin
// adapter's) a sessions.Service on a fresh database with one enabled,
// present node as the only placement candidate and no deployment yet.
//
// Rules:
//   - It is imported only by tests (core/sessions, core/sessionadmin).
//   - Each New is a real migrated database (core/store/storetest) with its
//     own installation and sealing key: tests share nothing.
//   - Deploy commits the next deployment generation through the store,
//     with the test's max_active; nothing is placed until a test deploys.
//   - It may import core/sessions, core/secrets, the store and its test
//     helpers; never an admin adapter.
package sessionstest
