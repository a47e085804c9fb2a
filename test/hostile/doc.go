// Package hostile drives a real berth-core as a hostile client of its admin
// API (issue 14, item 6): unauthenticated oversized and deeply nested
// bodies, huge headers and malformed wire data must be refused before they
// cost Core memory, with the admin API's fixed codes and reasons, while an
// authenticated operator is still served.
//
// TestMeasureHostileLoad (opt-in: HOSTILE_MEASURE=1) reports Core's
// resident memory and an authenticated call's median latency under such
// load; it asserts nothing. Run it against an older build with
// BERTH_TEST_CORE_BIN to compare before and after.
package hostile
