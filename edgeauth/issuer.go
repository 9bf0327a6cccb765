package edgeauth

// Issuer is the iss every token the verifier accepts carries, for the agent card.
func (v *JWT) Issuer() string { return v.cfg.Issuer }
