package amqp

func (*Open) appendFields(*listWriter) error           { panic("todo") }
func (*Open) decodeFields(*fieldReader) error          { panic("todo") }
func (*Begin) appendFields(*listWriter) error          { panic("todo") }
func (*Begin) decodeFields(*fieldReader) error         { panic("todo") }
func (*Attach) appendFields(*listWriter) error         { panic("todo") }
func (*Attach) decodeFields(*fieldReader) error        { panic("todo") }
func (*Flow) appendFields(*listWriter) error           { panic("todo") }
func (*Flow) decodeFields(*fieldReader) error          { panic("todo") }
func (*Transfer) appendFields(*listWriter) error       { panic("todo") }
func (*Transfer) decodeFields(*fieldReader) error      { panic("todo") }
func (*Disposition) appendFields(*listWriter) error    { panic("todo") }
func (*Disposition) decodeFields(*fieldReader) error   { panic("todo") }
func (*Detach) appendFields(*listWriter) error         { panic("todo") }
func (*Detach) decodeFields(*fieldReader) error        { panic("todo") }
func (*End) appendFields(*listWriter) error            { panic("todo") }
func (*End) decodeFields(*fieldReader) error           { panic("todo") }
func (*Close) appendFields(*listWriter) error          { panic("todo") }
func (*Close) decodeFields(*fieldReader) error         { panic("todo") }
func (*Error) appendFields(*listWriter) error          { panic("todo") }
func (*Error) decodeFields(*fieldReader) error         { panic("todo") }
func (*Source) appendFields(*listWriter) error         { panic("todo") }
func (*Source) decodeFields(*fieldReader) error        { panic("todo") }
func (*Target) appendFields(*listWriter) error         { panic("todo") }
func (*Target) decodeFields(*fieldReader) error        { panic("todo") }
func (*Received) appendFields(*listWriter) error       { panic("todo") }
func (*Received) decodeFields(*fieldReader) error      { panic("todo") }
func (*Accepted) appendFields(*listWriter) error       { panic("todo") }
func (*Accepted) decodeFields(*fieldReader) error      { panic("todo") }
func (*Rejected) appendFields(*listWriter) error       { panic("todo") }
func (*Rejected) decodeFields(*fieldReader) error      { panic("todo") }
func (*Released) appendFields(*listWriter) error       { panic("todo") }
func (*Released) decodeFields(*fieldReader) error      { panic("todo") }
func (*Modified) appendFields(*listWriter) error       { panic("todo") }
func (*Modified) decodeFields(*fieldReader) error      { panic("todo") }
func (*SASLMechanisms) appendFields(*listWriter) error { panic("todo") }
func (*SASLMechanisms) decodeFields(*fieldReader) error {
	panic("todo")
}
func (*SASLInit) appendFields(*listWriter) error       { panic("todo") }
func (*SASLInit) decodeFields(*fieldReader) error      { panic("todo") }
func (*SASLChallenge) appendFields(*listWriter) error  { panic("todo") }
func (*SASLChallenge) decodeFields(*fieldReader) error { panic("todo") }
func (*SASLResponse) appendFields(*listWriter) error   { panic("todo") }
func (*SASLResponse) decodeFields(*fieldReader) error  { panic("todo") }
func (*SASLOutcome) appendFields(*listWriter) error    { panic("todo") }
func (*SASLOutcome) decodeFields(*fieldReader) error   { panic("todo") }

// MarshalBinary encodes m as its sections in the specification's order.
func (m *Message) MarshalBinary() ([]byte, error) { panic("todo") }

// UnmarshalBinary decodes the sections of data into m, replacing its contents. Every error
// wraps ErrMalformed.
func (m *Message) UnmarshalBinary(data []byte) error { panic("todo") }
