// Package errdefstest holds the test assertions on errdefs classes that
// every layer's tests share (the logic's, the adapters', the store's), so
// a logic package's tests need not import an API layer's helpers.
//
// Rules:
//   - It is imported only by tests.
//   - Assertions check classes with errors.Is and refusals by their fixed
//     reason (WantClass, WantRefusal, WantField), never by message text.
//   - It imports errdefs and the standard library only, so any package's
//     tests may use it without pulling in a wire codec.
package errdefstest
