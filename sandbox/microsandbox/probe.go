package microsandbox

// The probe's diagnostic codes, in the order the probe checks them
// (platform, then capacity, then artifacts, then the pinned image).
const (
	ProbeNoKVM            = "kvm_device_missing"
	ProbeNoVirtualization = "hardware_virtualization_unavailable"
	ProbeCapacity         = "host_capacity_insufficient"
	ProbeMSBMissing       = "msb_missing"
	ProbeMSBVersion       = "msb_version_mismatch"
	ProbeLibkrunfwMissing = "libkrunfw_missing"
	ProbeImageMissing     = "image_missing"
)
