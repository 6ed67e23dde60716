package amqp

// Descriptor codes of the SASL frame bodies (AMQP 1.0 part 5.3).
const (
	CodeSASLMechanisms uint64 = 0x40
	CodeSASLInit       uint64 = 0x41
	CodeSASLChallenge  uint64 = 0x42
	CodeSASLResponse   uint64 = 0x43
	CodeSASLOutcome    uint64 = 0x44
)

// SASL outcome codes (part 5.3.3.6).
const (
	SASLCodeOK      uint8 = 0 // authentication succeeded
	SASLCodeAuth    uint8 = 1 // failed: bad credentials
	SASLCodeSys     uint8 = 2 // failed: system error
	SASLCodeSysPerm uint8 = 3 // failed: permanent system error
	SASLCodeSysTemp uint8 = 4 // failed: transient system error
)

// SASLMechanisms is the server's list of mechanisms, sent first (part 5.3.3.1).
type SASLMechanisms struct {
	Mechanisms []Symbol // mandatory, for example {"ANONYMOUS"}
}

// SASLInit is the client's choice of mechanism (part 5.3.3.2).
type SASLInit struct {
	Mechanism       Symbol // mandatory
	InitialResponse []byte // nil: absent
	Hostname        string // empty: absent
}

// SASLChallenge is a server challenge (part 5.3.3.3).
type SASLChallenge struct {
	Challenge []byte // mandatory
}

// SASLResponse is a client response to a challenge (part 5.3.3.4).
type SASLResponse struct {
	Response []byte // mandatory
}

// SASLOutcome ends the SASL exchange (part 5.3.3.5); Code SASLCodeOK is success.
type SASLOutcome struct {
	Code           uint8 // mandatory
	AdditionalData []byte
}

// DescriptorCode implements Performative.
func (*SASLMechanisms) DescriptorCode() uint64 { return CodeSASLMechanisms }

// DescriptorCode implements Performative.
func (*SASLInit) DescriptorCode() uint64 { return CodeSASLInit }

// DescriptorCode implements Performative.
func (*SASLChallenge) DescriptorCode() uint64 { return CodeSASLChallenge }

// DescriptorCode implements Performative.
func (*SASLResponse) DescriptorCode() uint64 { return CodeSASLResponse }

// DescriptorCode implements Performative.
func (*SASLOutcome) DescriptorCode() uint64 { return CodeSASLOutcome }
