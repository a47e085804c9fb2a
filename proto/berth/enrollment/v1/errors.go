package enrollmentv1

// ErrorDomain is the google.rpc.ErrorInfo domain of EnrollmentService's
// errors.
const ErrorDomain = "enrollment.berth.dev"

// ReasonTokenRejected is the one refusal of an enrollment, whichever check
// failed (unknown, used, revoked or expired token, another installation's
// CA): the operator creates a new token. The other reasons are the shared
// ones of the errdefs classes ("invalid" with the field, ...).
const ReasonTokenRejected = "enrollment_token_rejected"
