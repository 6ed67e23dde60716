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

var (
	_ Performative = (*SASLMechanisms)(nil)
	_ Performative = (*SASLInit)(nil)
	_ Performative = (*SASLChallenge)(nil)
	_ Performative = (*SASLResponse)(nil)
	_ Performative = (*SASLOutcome)(nil)
)

func (s *SASLMechanisms) appendFields(w *listWriter) error {
	if len(s.Mechanisms) == 0 {
		w.value(Array{}) // mandatory: an empty array rather than null
		return w.err
	}
	w.symbols(s.Mechanisms)
	return nil
}

func (s *SASLMechanisms) decodeFields(f *fieldReader) error {
	if len(f.d.b) == 0 || f.left == 0 || f.d.b[0] == tcNull {
		f.missing("sasl-server-mechanisms")
		return f.err
	}
	s.Mechanisms = f.symbols()
	return f.err
}

func (s *SASLInit) appendFields(w *listWriter) error {
	w.symbol(s.Mechanism)
	w.optBinary(s.InitialResponse)
	w.optStr(s.Hostname)
	return nil
}

func (s *SASLInit) decodeFields(f *fieldReader) error {
	s.Mechanism = f.mandatorySymbol("mechanism")
	s.InitialResponse = f.binary()
	s.Hostname = f.str()
	return f.err
}

func (s *SASLChallenge) appendFields(w *listWriter) error {
	w.binary(s.Challenge)
	return nil
}

func (s *SASLChallenge) decodeFields(f *fieldReader) error {
	s.Challenge = f.mandatoryBinary("challenge")
	return f.err
}

func (s *SASLResponse) appendFields(w *listWriter) error {
	w.binary(s.Response)
	return nil
}

func (s *SASLResponse) decodeFields(f *fieldReader) error {
	s.Response = f.mandatoryBinary("response")
	return f.err
}

func (s *SASLOutcome) appendFields(w *listWriter) error {
	w.ubyte(s.Code)
	w.optBinary(s.AdditionalData)
	return nil
}

func (s *SASLOutcome) decodeFields(f *fieldReader) error {
	v, ok := f.ubyteField()
	if !ok {
		f.missing("code")
	}
	s.Code = v
	s.AdditionalData = f.binary()
	return f.err
}
