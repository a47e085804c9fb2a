package adminv1

// ErrorDomain is the google.rpc.ErrorInfo domain of every admin API error:
// Core's admin server attaches it, and a client (berthctl, the black-box
// tests) reads the fixed reason only from an ErrorInfo of this domain.
const ErrorDomain = "admin.berth.dev"
