package enrollmentgrpc

import (
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"

	"berth.dev/core/enrollment"
)

// enrollResponse is the API form of an enrollment: the node's id, the
// installation's, the signed certificate and the CA that signed it.
func enrollResponse(res enrollment.Result) *enrollmentv1.EnrollResponse {
	return &enrollmentv1.EnrollResponse{
		NodeId:           res.NodeID.String(),
		InstallationId:   res.InstallationID,
		CertificateDer:   res.CertificateDER,
		CaCertificateDer: res.CADER,
	}
}
