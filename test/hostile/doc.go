// Package hostile drives a real berth-core as a hostile client of its admin
// API (issue 14, item 6): unauthenticated oversized and deeply nested
// bodies, huge headers and malformed wire data must be refused before they
// cost Core memory, with the admin API's fixed codes and reasons, while an
// authenticated operator is still served. Each case that carries a
// credential runs with the administrator's token and with a project key
// (issue 31, item 2); TestHostileProjectKeys adds the keys' own: unknown,
// wrong, revoked, expired and oversized key tokens all answered alike, two
// authorization headers, a key's body to a method it may not call refused
// from the headers (Core's memory reported), and 10,000 bad key tokens.
//
// TestMeasureHostileLoad (opt-in: HOSTILE_MEASURE=1) reports Core's
// resident memory and an authenticated call's median latency under such
// load; it asserts nothing. Run it against an older build with
// BERTH_TEST_CORE_BIN to compare before and after.
package hostile
