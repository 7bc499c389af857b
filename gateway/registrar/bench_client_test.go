package registrar

import icdigest "github.com/icholy/digest"

// benchAnswer computes the client's credentials for a challenge value.
func benchAnswer(challenge, user, password string) string {
	ch, err := icdigest.ParseChallenge(challenge)
	if err != nil {
		panic(err)
	}
	cr, err := icdigest.Digest(ch, icdigest.Options{Method: "REGISTER", URI: "sip:" + realm, Username: user, Password: password, Count: 1})
	if err != nil {
		panic(err)
	}
	return cr.String()
}
