package e2btest

// SelectorFixture is one configuration request and the verdict every
// entry point (the adapter's configuration adapter, the registry's
// Normalize behind berthctl and the admin API) must give it.
type SelectorFixture struct {
	Name string
	// Public is the public object's JSON.
	Public string
	// Credential is the credential object's JSON; "" means a valid one.
	Credential string
	// Field is the invalid field the refusal names; "" means accepted.
	Field string
	// Normalized is the accepted request's stored public object.
	Normalized string
}

// SelectorFixtures is the one table of E2B selector cases (the guide's
// shared selector fixtures). Secret-looking values in refused fields
// must never appear in the error.
func SelectorFixtures() []SelectorFixture {
	const pub = "configuration.public"
	return []SelectorFixture{
		{Name: "template only", Public: `{"template":"berth-runtime"}`,
			Normalized: `{"api_url":"https://api.e2b.app","template":"berth-runtime","lease_seconds":900}`},
		{Name: "every field", Public: `{"api_url":"https://api.e2b.example","sandbox_url":"https://sandbox.e2b.example:8443","template":"team-x/berth-runtime:v1.2.3","lease_seconds":3600}`,
			Normalized: `{"api_url":"https://api.e2b.example","sandbox_url":"https://sandbox.e2b.example:8443","template":"team-x/berth-runtime:v1.2.3","lease_seconds":3600}`},
		{Name: "loopback http", Public: `{"api_url":"http://127.0.0.1:3000","sandbox_url":"http://[::1]:49983","template":"t_1"}`,
			Normalized: `{"api_url":"http://127.0.0.1:3000","sandbox_url":"http://[::1]:49983","template":"t_1","lease_seconds":900}`},
		{Name: "localhost http", Public: `{"api_url":"http://localhost:3000","template":"abc"}`,
			Normalized: `{"api_url":"http://localhost:3000","template":"abc","lease_seconds":900}`},
		{Name: "lease bounds", Public: `{"template":"abc","lease_seconds":300}`,
			Normalized: `{"api_url":"https://api.e2b.app","template":"abc","lease_seconds":300}`},
		{Name: "lease upper bound", Public: `{"template":"abc","lease_seconds":86400}`,
			Normalized: `{"api_url":"https://api.e2b.app","template":"abc","lease_seconds":86400}`},
		{Name: "template id", Public: `{"template":"rki5dems9wqfm4r03t7g"}`,
			Normalized: `{"api_url":"https://api.e2b.app","template":"rki5dems9wqfm4r03t7g","lease_seconds":900}`},

		{Name: "no template", Public: `{}`, Field: pub + ".template"},
		{Name: "upper case template", Public: `{"template":"Berth-Runtime"}`, Field: pub + ".template"},
		{Name: "spaced template", Public: `{"template":" berth"}`, Field: pub + ".template"},
		{Name: "default tag", Public: `{"template":"berth:default"}`, Field: pub + ".template"},
		{Name: "uuid tag", Public: `{"template":"berth:0f8fad5b-d9cb-469f-a165-70867728950e"}`, Field: pub + ".template"},
		{Name: "two namespaces", Public: `{"template":"a/b/c"}`, Field: pub + ".template"},
		{Name: "colon in namespace", Public: `{"template":"a:b/c"}`, Field: pub + ".template"},
		{Name: "empty tag", Public: `{"template":"abc:"}`, Field: pub + ".template"},
		{Name: "long template", Public: `{"template":"` + repeat("a", 63) + `/` + repeat("b", 63) + `:c"}`, Field: pub + ".template"},
		{Name: "http remote", Public: `{"api_url":"http://api.e2b.app","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "http private", Public: `{"api_url":"http://10.0.0.1","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url with path", Public: `{"api_url":"https://api.e2b.app/v2","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url with slash", Public: `{"api_url":"https://api.e2b.app/","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url with user", Public: `{"api_url":"https://hunter2@api.e2b.app","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url with query", Public: `{"api_url":"https://api.e2b.app?key=hunter2","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url upper case", Public: `{"api_url":"https://API.e2b.app","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url other scheme", Public: `{"api_url":"ftp://api.e2b.app","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url empty port", Public: `{"api_url":"https://api.e2b.app:","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url zero-padded port", Public: `{"api_url":"https://api.e2b.app:0443","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "url relative", Public: `{"api_url":"api.e2b.app","template":"abc"}`, Field: pub + ".api_url"},
		{Name: "sandbox url http remote", Public: `{"sandbox_url":"http://sandbox.e2b.app","template":"abc"}`, Field: pub + ".sandbox_url"},
		{Name: "sandbox url empty", Public: `{"sandbox_url":"","template":"abc"}`, Field: pub + ".sandbox_url"},
		{Name: "lease short", Public: `{"template":"abc","lease_seconds":299}`, Field: pub + ".lease_seconds"},
		{Name: "lease long", Public: `{"template":"abc","lease_seconds":86401}`, Field: pub + ".lease_seconds"},
		{Name: "lease fraction", Public: `{"template":"abc","lease_seconds":600.5}`, Field: pub},
		{Name: "unknown field", Public: `{"template":"abc","api_key":"hunter2"}`, Field: pub},
		{Name: "case alias", Public: `{"Template":"abc"}`, Field: pub},
		{Name: "duplicate key", Public: `{"template":"abc","template":"def"}`, Field: pub},
		{Name: "not an object", Public: `["abc"]`, Field: pub},
		{Name: "trailing data", Public: `{"template":"abc"} {}`, Field: pub},
		{Name: "no credential", Public: `{"template":"abc"}`, Credential: `{}`, Field: "configuration.credential"},
		{Name: "empty key", Public: `{"template":"abc"}`, Credential: `{"api_key":""}`, Field: "configuration.credential"},
		{Name: "key with space", Public: `{"template":"abc"}`, Credential: `{"api_key":"hunter2 x"}`, Field: "configuration.credential"},
		{Name: "key too long", Public: `{"template":"abc"}`, Credential: `{"api_key":"` + repeat("k", 257) + `"}`, Field: "configuration.credential"},
		{Name: "credential extra field", Public: `{"template":"abc"}`, Credential: `{"api_key":"hunter2","team":"x"}`, Field: "configuration.credential"},
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
