package ses

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"github.com/mailhook/mailhook/internal/provider"

	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// Body marshals e to the JSON SNS would POST.
func (e Envelope) Body() []byte {
	b, err := json.Marshal(e)
	if err != nil { // an Envelope holds only strings
		panic(err)
	}
	return b
}

// signEnvelope signs env as SNS would with key (see providertest.SNSSignature): it sets
// SignatureVersion and Signature. Set every other field first.
func signEnvelope(env *Envelope, key *rsa.PrivateKey, version string) error {
	fields := map[string]string{
		"Type": env.Type, "MessageId": env.MessageID, "TopicArn": env.TopicARN, "Message": env.Message,
		"Timestamp": env.Timestamp, "Token": env.Token, "SubscribeURL": env.SubscribeURL,
	}
	if env.hasSubject || env.Subject != "" {
		fields["Subject"] = env.Subject
	}
	sig, err := providertest.SNSSignature(fields, key, version)
	if err != nil {
		return err
	}
	env.SignatureVersion, env.Signature = version, sig
	return nil
}

// selfSignedCertPEM is providertest.SelfSignedCertPEM.
var selfSignedCertPEM = providertest.SelfSignedCertPEM

// put stores a certificate: tests inject one to run offline.
func (c *certCache) put(key string, cert *x509.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, cert)
}

func (c *certCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// msgKey is the message key of one recipient of a message sent to several: the mail's
// messageId and the recipient's tag, never the address.
func msgKey(mailID, address string) string {
	return mailID + ":" + provider.RecipientTag(mailID, address)
}
