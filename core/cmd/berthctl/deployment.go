package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

func (a *app) deploymentCmd() *cobra.Command {
	c := a.groupCmd("deployment", "Select the sandbox provider and size its sandboxes (DeploymentService)",
		a.deploymentGetCmd(), a.deploymentPreviewCmd(), a.deploymentCommitCmd(), a.deploymentReplaceCmd(),
		a.deploymentDisableCmd(), a.deploymentEnableCmd(), a.deploymentResetCmd())
	c.Long = `A candidate comes from -f FILE (a berth.admin.v1.DeploymentCandidate in
JSON, - for stdin) and from flags, which override the file's fields. The
provider's public configuration object is -f's configuration or
--configuration; its write-only credential (E2B's {"api_key": ...}) is
-f's credential or --credential-file FILE (- for stdin), so it never goes
in argv. A candidate without a suspension policy gets the provider's
registered defaults (Docker: idle 15m, snapshots kept 168h; preview shows
them); --no-suspension turns suspension off.`
	c.Example = `  berthctl deployment preview --provider docker --cpu-millis 1000 --memory-bytes 512Mi \
      --disk-bytes 2Gi --max-active 4 --max-retained 4
  berthctl deployment commit -f candidate.json --expected-generation 0
  berthctl deployment preview --provider e2b --configuration '{"template":"berth-runtime-1-2-3"}' \
      --credential-file /root/e2b-credential.json --cpu-millis 2000 --memory-bytes 2Gi \
      --disk-bytes 10Gi --max-active 20 --max-retained 0`
	return c
}

func (a *app) deploymentGetCmd() *cobra.Command {
	return a.command("get", "Show the deployment: provider, specification, generations and what each node serves", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		resp, err := call(a.deployments.GetDeployment, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { deploymentFields(w, resp.GetDeployment(), true) })
	})
}

func (a *app) deploymentDisableCmd() *cobra.Command {
	c := a.command("disable", "Disable the sandbox provider: CreateSession is refused and no new Create is sent; cleanup and reads go on", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		resp, err := call(a.deployments.DisableProvider, &adminv1.DisableProviderRequest{Name: "deployment"})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { deploymentFields(w, resp.GetDeployment(), true) })
	})
	c.Long = `disable stops the provider durably: CreateSession is refused with
provider_disabled and Core sends no new Create, so pending Sessions wait.
Deleting Sessions, cleaning up their compute, running Turns and every read
go on. Disabling again changes nothing; 'deployment enable' is the way back.`
	return c
}

func (a *app) deploymentEnableCmd() *cobra.Command {
	return a.command("enable", "Enable the sandbox provider again: Session creation and the pending Creates resume", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		resp, err := call(a.deployments.EnableProvider, &adminv1.EnableProviderRequest{Name: "deployment"})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { deploymentFields(w, resp.GetDeployment(), true) })
	})
}

func (a *app) deploymentPreviewCmd() *cobra.Command {
	var (
		cf         candidateFlags
		updateMask string
	)
	c := a.command("preview", "Validate and normalize a candidate and show what a commit would store (writes nothing)", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		cand, err := cf.candidate(cmd, a.stdin)
		if err != nil {
			return err
		}
		resp, err := call(a.deployments.PreviewDeployment, &adminv1.PreviewDeploymentRequest{Candidate: cand, UpdateMask: mask(updateMask)})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) {
			deploymentFields(w, resp.GetDeployment(), false)
			field(w, "CHANGED", yesno(resp.GetChanged()))
			field(w, "EXPECTED GENERATION", fmt.Sprint(resp.GetExpectedGeneration()))
		})
	})
	cf.flags(c.Flags())
	c.Flags().StringVar(&updateMask, "update-mask", "", "preview a replacement that sets only these comma-separated candidate paths (see replace)")
	return c
}

func (a *app) deploymentCommitCmd() *cobra.Command {
	var (
		cf       candidateFlags
		expected uint64
	)
	c := a.command("commit", "Commit the first deployment generation (or the first after a reset)", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		cand, err := cf.candidate(cmd, a.stdin)
		if err != nil {
			return err
		}
		resp, err := call(a.deployments.CommitDeployment, &adminv1.CommitDeploymentRequest{Candidate: cand, ExpectedGeneration: expected})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) { deploymentFields(w, resp.GetDeployment(), false) })
	})
	cf.flags(c.Flags())
	c.Flags().Uint64Var(&expected, "expected-generation", 0, "the generation previewed against (0 before the first commit; after a reset its empty generation)")
	return c
}

func (a *app) deploymentReplaceCmd() *cobra.Command {
	var (
		cf         candidateFlags
		updateMask string
		expected   uint64
	)
	c := a.command("replace", "Replace the committed deployment with a new generation", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("expected-generation") {
			return usagef(cmd, "replace needs --expected-generation: the generation you previewed against ('deployment preview' shows it)")
		}
		cand, err := cf.candidate(cmd, a.stdin)
		if err != nil {
			return err
		}
		resp, err := call(a.deployments.ReplaceDeployment, &adminv1.ReplaceDeploymentRequest{Candidate: cand, UpdateMask: mask(updateMask), ExpectedGeneration: expected})
		if err != nil {
			return err
		}
		return a.show(resp, func(w io.Writer) {
			deploymentFields(w, resp.GetDeployment(), false)
			field(w, "CHANGED", yesno(resp.GetChanged()))
			field(w, "RETIRED NODES", dash(strings.Join(resp.GetRetiredNodes(), ", ")))
			field(w, "REVOKED TOKENS", fmt.Sprint(resp.GetRevokedEnrollmentTokens()))
			field(w, "ADMISSION PAUSE", dur(resp.GetAdmissionPause()))
		})
	})
	c.Long = `replace commits the candidate as a new generation when --expected-generation
is still current. --update-mask names the candidate's paths that are set;
the rest is inherited from the current generation: provider_kind,
configuration, credential, specification, or
specification.{cpu_millis,memory_bytes,disk_bytes,max_active,max_retained,suspension}.
Without it the candidate is complete. Preview with the same mask first.`
	c.Example = `  berthctl deployment preview --memory-bytes 768Mi --update-mask specification.memory_bytes
  berthctl deployment replace --memory-bytes 768Mi --update-mask specification.memory_bytes --expected-generation 1`
	cf.flags(c.Flags())
	c.Flags().StringVar(&updateMask, "update-mask", "", "comma-separated candidate paths the candidate sets; the rest is inherited")
	c.Flags().Uint64Var(&expected, "expected-generation", 0, "the generation previewed against (required)")
	return c
}

// mask parses --update-mask: comma-separated paths, nil when empty.
func mask(paths string) *fieldmaskpb.FieldMask {
	if paths == "" {
		return nil
	}
	m := &fieldmaskpb.FieldMask{}
	for _, p := range strings.Split(paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			m.Paths = append(m.Paths, p)
		}
	}
	return m
}

// candidateFlags are a deployment candidate's flags.
type candidateFlags struct {
	file                 string
	provider             string
	configuration        string
	credentialFile       string
	cpuMillis            int64
	memory, disk         sizeValue
	maxActive, maxRetain int32
	idle, retention      time.Duration
	noSuspension         bool
}

func (c *candidateFlags) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&c.file, "file", "f", "", "the candidate in JSON (berth.admin.v1.DeploymentCandidate; - for stdin)")
	fs.StringVar(&c.provider, "provider", "", "provider kind, for example docker")
	fs.StringVar(&c.configuration, "configuration", "", `the provider's public configuration object in JSON, for example '{"template":"berth-runtime-1-2-3"}' (never a credential: see --credential-file)`)
	fs.StringVar(&c.credentialFile, "credential-file", "", `a file holding the provider's write-only credential object in JSON, for example {"api_key":"..."} (- for stdin): it never goes in argv`)
	fs.Int64Var(&c.cpuMillis, "cpu-millis", 0, "CPU per sandbox in millicores")
	fs.Var(&c.memory, "memory-bytes", "memory per sandbox (bytes, or with Ki, Mi, Gi, Ti)")
	fs.Var(&c.disk, "disk-bytes", "disk per sandbox (bytes, or with Ki, Mi, Gi, Ti)")
	fs.Int32Var(&c.maxActive, "max-active", 0, "active sandboxes a node may hold")
	fs.Int32Var(&c.maxRetain, "max-retained", 0, "retained (suspended) sandboxes a node may hold")
	fs.DurationVar(&c.idle, "suspension-idle", 0, "suspend a Session idle this long (whole seconds)")
	fs.DurationVar(&c.retention, "suspension-retention", 0, "keep a suspended Session's snapshot this long (whole seconds)")
	fs.BoolVar(&c.noSuspension, "no-suspension", false, "turn suspension off (without a policy the provider's registered defaults apply)")
}

// candidate builds the candidate: the file's, then each flag given.
func (c *candidateFlags) candidate(cmd *cobra.Command, stdin io.Reader) (*adminv1.DeploymentCandidate, error) {
	cand := &adminv1.DeploymentCandidate{}
	if c.file == "-" && c.credentialFile == "-" {
		return nil, usagef(cmd, "-f and --credential-file cannot both read stdin")
	}
	if c.file != "" {
		data, err := readBounded(c.file, stdin)
		if err != nil {
			return nil, err
		}
		// The file may hold a credential, and protojson's errors quote the
		// input: the message names the file only.
		if err := protojson.Unmarshal(data, cand); err != nil {
			source := c.file
			if source == "-" {
				source = "stdin"
			}
			return nil, adminclient.Errorf("candidate_invalid", "%s is not a berth.admin.v1.DeploymentCandidate in JSON (protojson field names, for example {\"providerKind\":\"docker\",\"specification\":{...}})", source)
		}
	}
	set := cmd.Flags().Changed
	spec := func() *adminv1.Specification {
		if cand.Specification == nil {
			cand.Specification = &adminv1.Specification{}
		}
		return cand.Specification
	}
	suspension := func() *adminv1.SuspensionPolicy {
		if spec().Suspension == nil {
			spec().Suspension = &adminv1.SuspensionPolicy{}
		}
		return spec().Suspension
	}
	if set("provider") {
		cand.ProviderKind = c.provider
	}
	if err := c.providerObjects(cmd, cand, stdin); err != nil {
		return nil, err
	}
	if set("cpu-millis") {
		spec().CpuMillis = c.cpuMillis
	}
	if set("memory-bytes") {
		spec().MemoryBytes = int64(c.memory)
	}
	if set("disk-bytes") {
		spec().DiskBytes = int64(c.disk)
	}
	if set("max-active") {
		spec().MaxActive = c.maxActive
	}
	if set("max-retained") {
		spec().MaxRetained = c.maxRetain
	}
	if set("suspension-idle") {
		suspension().Idle = durationpb.New(c.idle)
	}
	if set("suspension-retention") {
		suspension().Retention = durationpb.New(c.retention)
	}
	if set("no-suspension") {
		if c.noSuspension {
			suspension().Disabled = true
		} else if p := cand.GetSpecification().GetSuspension(); p != nil {
			p.Disabled = false // the file's choice overridden; no policy created
		}
	}
	return cand, nil
}

// providerObjects sets the candidate's configuration from --configuration
// and its credential from --credential-file, when given.
func (c *candidateFlags) providerObjects(cmd *cobra.Command, cand *adminv1.DeploymentCandidate, stdin io.Reader) error {
	if cmd.Flags().Changed("configuration") {
		st := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(c.configuration), st); err != nil {
			return usagef(cmd, `--configuration is not a JSON object (for example '{"template":"berth-runtime-1-2-3"}')`)
		}
		cand.Configuration = st
	}
	if c.credentialFile != "" {
		st, err := credentialObject(c.credentialFile, stdin)
		if err != nil {
			return err
		}
		cand.Credential = st
	}
	return nil
}

// credentialObject reads --credential-file: one JSON object. Errors name
// the file only: protojson's quote the input, which is a secret.
func credentialObject(path string, stdin io.Reader) (*structpb.Struct, error) {
	data, err := readBounded(path, stdin)
	if err != nil {
		return nil, err
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(data, st); err != nil {
		source := path
		if source == "-" {
			source = "stdin"
		}
		return nil, adminclient.Errorf("credential_invalid", `%s is not a JSON object (the provider's credential object, for example {"api_key":"..."})`, source)
	}
	return st, nil
}

// readBounded reads a file ("-": stdin) of at most a request's size.
func readBounded(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, adminclient.MaxMessageBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > adminclient.MaxMessageBytes {
		return nil, adminclient.Errorf("input_too_large", "%s is larger than an admin request may be (%d bytes)", path, adminclient.MaxMessageBytes)
	}
	return data, nil
}

// sizeValue is a byte count flag: a number, optionally with a binary
// unit (Ki, Mi, Gi, Ti).
type sizeValue int64

func (s *sizeValue) String() string { return strconv.FormatInt(int64(*s), 10) }
func (s *sizeValue) Type() string   { return "size" }

func (s *sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeValue(n)
	return nil
}

// parseSize reads "536870912", "512Mi" or "2Gi".
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a byte count, optionally with Ki, Mi, Gi or Ti")
	}
	if n > (1<<63-1)/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}

func deploymentFields(w io.Writer, d *adminv1.Deployment, all bool) {
	s := d.GetSpecification()
	field(w, "GENERATION", fmt.Sprint(d.GetGeneration()))
	field(w, "PROVIDER", dash(d.GetProviderKind()))
	if cfg := d.GetConfiguration(); len(cfg.GetFields()) > 0 {
		data, _ := protojson.Marshal(cfg)
		field(w, "CONFIGURATION", string(data))
	}
	field(w, "CREDENTIAL STORED", yesno(d.GetHasCredential()))
	field(w, "CPU MILLIS", fmt.Sprint(s.GetCpuMillis()))
	field(w, "MEMORY BYTES", size(s.GetMemoryBytes()))
	field(w, "DISK BYTES", size(s.GetDiskBytes()))
	field(w, "MAX ACTIVE", fmt.Sprint(s.GetMaxActive()))
	field(w, "MAX RETAINED", fmt.Sprint(s.GetMaxRetained()))
	switch p := s.GetSuspension(); {
	case p == nil:
		field(w, "SUSPENSION", "-")
	case p.GetDisabled():
		field(w, "SUSPENSION", "off")
	default:
		field(w, "SUSPENSION", fmt.Sprintf("after %s idle, snapshots kept %s", dur(p.GetIdle()), dur(p.GetRetention())))
	}
	field(w, "COMMITTED", ts(d.GetCommitTime()))
	if !all {
		return
	}
	disabled := "no"
	if d.GetProviderDisabled() {
		disabled = "since " + ts(d.GetProviderDisableTime())
	}
	field(w, "PROVIDER DISABLED", disabled)
	field(w, "SERVING GENERATION", fmt.Sprintf("%d (since %s)", d.GetServingGeneration(), ts(d.GetServingTime())))
	var retained []string
	for _, r := range d.GetRetainedGenerations() {
		unit := "allocations"
		if r.GetAllocations() == 1 {
			unit = "allocation"
		}
		retained = append(retained, fmt.Sprintf("%d (%d %s)", r.GetGeneration(), r.GetAllocations(), unit))
	}
	field(w, "RETAINED GENERATIONS", dash(strings.Join(retained, ", ")))
	if direct := d.GetDirectGenerations(); len(direct) > 0 {
		field(w, "DIRECT GENERATIONS", served(direct))
	}
	if len(d.GetNodes()) == 0 {
		return
	}
	fmt.Fprintln(w)
	row(w, "NODE", "CONNECTED", "GENERATIONS SERVED")
	for _, n := range d.GetNodes() {
		row(w, n.GetNode(), yesno(n.GetConnected()), served(n.GetGenerations()))
	}
}

// served lists generations as "2 ready, 3 not ready (code)".
func served(gs []*adminv1.ServedGeneration) string {
	var out []string
	for _, g := range gs {
		gen := fmt.Sprintf("%d ready", g.GetGeneration())
		if !g.GetReady() {
			gen = fmt.Sprintf("%d not ready (%s)", g.GetGeneration(), dash(g.GetDiagnosticCode()))
		}
		out = append(out, gen)
	}
	return dash(strings.Join(out, ", "))
}
