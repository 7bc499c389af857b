package digest_test

import (
	"fmt"

	"github.com/outpost/outpost/gateway/digest"
)

// A registrar answers an unauthenticated REGISTER with 401 and one
// WWW-Authenticate header per challenge, then verifies the retried request.
func Example() {
	auth, err := digest.New(digest.Config{Realm: "branch.example"})
	if err != nil {
		panic(err)
	}
	// The user store keeps HA1s, never passwords.
	store := map[digest.Algorithm]map[string]string{
		digest.MD5:    {"1001": digest.HA1(digest.MD5, "1001", "branch.example", "s3cret")},
		digest.SHA256: {"1001": digest.HA1(digest.SHA256, "1001", "branch.example", "s3cret")},
	}
	lookup := func(user string, alg digest.Algorithm) (string, bool) {
		ha1, ok := store[alg][user]
		return ha1, ok
	}

	// 401 Unauthorized: add each as a WWW-Authenticate header value.
	challenges := auth.Challenges(false)
	fmt.Println(len(challenges), "challenges")

	// The retried REGISTER carries an Authorization header.
	authorization := `Digest username="1001", realm="branch.example", nonce="bogus", uri="sip:branch.example", response="00000000000000000000000000000000"`
	creds, err := digest.ParseCredentials(authorization)
	if err != nil {
		fmt.Println("400 Bad Request:", err)
		return
	}
	switch res := auth.Verify("REGISTER", &creds, lookup); res {
	case digest.OK:
		fmt.Println("200 OK for", creds.Username)
	case digest.Stale:
		fmt.Println("401 with Challenges(true)")
	default:
		fmt.Println("rejected:", res)
	}
	// Output:
	// 2 challenges
	// rejected: BadResponse
}
