package admin

import (
	"slices"
	"strings"
	"unicode"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// methods is the admin API's method table: every berth.admin.v1 method,
// and whether it mutates (true) or only reads (false). A mutating call's
// outcome is recorded in the audit trail (Auditor.Call) by the server's
// last interceptor. TestMethodTableClassifiesEveryMethod walks every
// berth.admin.v1 method in the proto registry and fails on one this table
// does not name, so a new method cannot be served unaudited by omission.
var methods = map[string]bool{
	adminv1.AllocationService_GetAllocation_FullMethodName:     false,
	adminv1.AllocationService_ListAllocations_FullMethodName:   false,
	adminv1.AuditService_ListAuditEvents_FullMethodName:        false,
	adminv1.DeploymentService_CommitDeployment_FullMethodName:  true,
	adminv1.DeploymentService_DisableProvider_FullMethodName:   true,
	adminv1.DeploymentService_EnableProvider_FullMethodName:    true,
	adminv1.DeploymentService_GetDeployment_FullMethodName:     false,
	adminv1.DeploymentService_PreviewDeployment_FullMethodName: false,
	adminv1.DeploymentService_ReplaceDeployment_FullMethodName: true,
	adminv1.DeploymentService_StartReset_FullMethodName:        true,
	adminv1.FileService_DownloadFiles_FullMethodName:           true,
	adminv1.FileService_UploadFiles_FullMethodName:             true,
	adminv1.DeploymentService_GetReset_FullMethodName:          false,
	adminv1.InstallationService_GetInstallation_FullMethodName: false,
	adminv1.NodeService_CreateEnrollmentToken_FullMethodName:   true,
	adminv1.NodeService_EnableNode_FullMethodName:              true,
	adminv1.NodeService_GetNode_FullMethodName:                 false,
	adminv1.NodeService_ListEnrollmentTokens_FullMethodName:    false,
	adminv1.NodeService_ListNodes_FullMethodName:               false,
	adminv1.NodeService_RemoveNode_FullMethodName:              true,
	adminv1.NodeService_RetireNode_FullMethodName:              true,
	adminv1.NodeService_RevokeEnrollmentToken_FullMethodName:   true,
	adminv1.ProjectService_CreateProject_FullMethodName:        true,
	adminv1.ProjectService_CreateProjectKey_FullMethodName:     true,
	adminv1.ProjectService_CreateTenant_FullMethodName:         true,
	adminv1.ProjectService_DeleteProject_FullMethodName:        true,
	adminv1.ProjectService_DeleteTenant_FullMethodName:         true,
	adminv1.ProjectService_GetProject_FullMethodName:           false,
	adminv1.ProjectService_GetTenant_FullMethodName:            false,
	adminv1.ProjectService_ListProjectKeys_FullMethodName:      false,
	adminv1.ProjectService_ListProjects_FullMethodName:         false,
	adminv1.ProjectService_RevokeProjectKey_FullMethodName:     true,
	adminv1.ProjectService_ListTenants_FullMethodName:          false,
	adminv1.ProjectService_UpdateProject_FullMethodName:        true,
	adminv1.ProjectService_UpdateTenant_FullMethodName:         true,
	adminv1.SessionService_CreateSession_FullMethodName:        true,
	adminv1.SessionService_DeleteSession_FullMethodName:        true,
	adminv1.SessionService_ForkSession_FullMethodName:          true,
	adminv1.SessionService_GetSession_FullMethodName:           false,
	adminv1.SessionService_ListSessions_FullMethodName:         false,
	adminv1.SessionService_ResumeSession_FullMethodName:        true,
	adminv1.SessionService_ArchiveSession_FullMethodName:       true,
	adminv1.SessionService_SuspendSession_FullMethodName:       true,
	adminv1.TurnService_CancelTurn_FullMethodName:              true,
	adminv1.TurnService_GetTurn_FullMethodName:                 false,
	adminv1.TurnService_ListTurns_FullMethodName:               false,
	adminv1.TurnService_StreamTurnOutput_FullMethodName:        false,
	adminv1.TurnService_SubmitTurn_FullMethodName:              true,
}

// Mutating reports whether fullMethod ("/berth.admin.v1.SessionService/
// CreateSession") changes state: false for a read and for a method the
// table does not name.
func Mutating(fullMethod string) bool { return methods[fullMethod] }

// Methods returns every method of the table, sorted, and whether each
// mutates.
func Methods() (names []string, mutating map[string]bool) {
	out := map[string]bool{}
	for m, v := range methods {
		out[m] = v
	}
	names = make([]string, 0, len(out))
	for m := range out {
		names = append(names, m)
	}
	slices.Sort(names)
	return names, out
}

// CallAction is the audit action of a call of fullMethod:
// "call.session_service.create_session"; "call.unknown" for a method the
// table does not name (the name is the caller's, never recorded).
func CallAction(fullMethod string) string {
	if _, ok := methods[fullMethod]; !ok {
		return "call.unknown"
	}
	svc, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, adminPrefix), "/")
	return "call." + snake(svc) + "." + snake(method)
}

// snake writes a CamelCase identifier in snake_case.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// namePatterns are the resource names an audit event may record: a
// request's name or parent is recorded only when it is one of these, so
// nothing else a caller sends (a token pasted into a name) reaches the
// trail.
var namePatterns = []Pattern{InstallationName, DeploymentName, NodeName, EnrollmentTokenName, SessionName,
	TurnName, AllocationName, TenantName, ProjectName, ProjectKeyName}

// knownName reports whether s is a name of one of namePatterns.
func knownName(s string) bool {
	for _, p := range namePatterns {
		if _, err := ValidateName("name", s, p); err == nil {
			return true
		}
	}
	return false
}
