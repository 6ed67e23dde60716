package amqp

// Field order and types of the performatives, terminus and delivery states follow the
// OASIS AMQP 1.0 specification, part 2.7, 2.8 and 3.4-3.5.

var (
	_ Performative  = (*Open)(nil)
	_ Performative  = (*Begin)(nil)
	_ Performative  = (*Attach)(nil)
	_ Performative  = (*Flow)(nil)
	_ Performative  = (*Transfer)(nil)
	_ Performative  = (*Disposition)(nil)
	_ Performative  = (*Detach)(nil)
	_ Performative  = (*End)(nil)
	_ Performative  = (*Close)(nil)
	_ DeliveryState = (*Received)(nil)
	_ DeliveryState = (*Accepted)(nil)
	_ DeliveryState = (*Rejected)(nil)
	_ DeliveryState = (*Released)(nil)
	_ DeliveryState = (*Modified)(nil)
	_ composite     = (*Error)(nil)
	_ composite     = (*Source)(nil)
	_ composite     = (*Target)(nil)
)

func (o *Open) appendFields(w *listWriter) error {
	w.str(o.ContainerID)
	w.optStr(o.Hostname)
	w.optUint(o.MaxFrameSize)
	w.optUshort(o.ChannelMax)
	w.optUint(o.IdleTimeOut)
	w.symbols(o.OutgoingLocales)
	w.symbols(o.IncomingLocales)
	w.symbols(o.OfferedCapabilities)
	w.symbols(o.DesiredCapabilities)
	w.optMap(o.Properties)
	return nil
}

func (o *Open) decodeFields(f *fieldReader) error {
	o.ContainerID = f.mandatoryStr("container-id")
	o.Hostname = f.str()
	o.MaxFrameSize = f.optUint()
	o.ChannelMax = f.optUshort()
	o.IdleTimeOut = f.optUint()
	o.OutgoingLocales = f.symbols()
	o.IncomingLocales = f.symbols()
	o.OfferedCapabilities = f.symbols()
	o.DesiredCapabilities = f.symbols()
	o.Properties = f.mapField()
	return f.err
}

func (b *Begin) appendFields(w *listWriter) error {
	w.optUshort(b.RemoteChannel)
	w.uint(b.NextOutgoingID)
	w.uint(b.IncomingWindow)
	w.uint(b.OutgoingWindow)
	w.optUint(b.HandleMax)
	w.symbols(b.OfferedCapabilities)
	w.symbols(b.DesiredCapabilities)
	w.optMap(b.Properties)
	return nil
}

func (b *Begin) decodeFields(f *fieldReader) error {
	b.RemoteChannel = f.optUshort()
	b.NextOutgoingID = f.mandatoryUint("next-outgoing-id")
	b.IncomingWindow = f.mandatoryUint("incoming-window")
	b.OutgoingWindow = f.mandatoryUint("outgoing-window")
	b.HandleMax = f.optUint()
	b.OfferedCapabilities = f.symbols()
	b.DesiredCapabilities = f.symbols()
	b.Properties = f.mapField()
	return f.err
}

func (a *Attach) appendFields(w *listWriter) error {
	w.str(a.Name)
	w.uint(a.Handle)
	w.boolean(bool(a.Role))
	if a.SndSettleMode == nil {
		w.null()
	} else {
		w.ubyte(uint8(*a.SndSettleMode))
	}
	if a.RcvSettleMode == nil {
		w.null()
	} else {
		w.ubyte(uint8(*a.RcvSettleMode))
	}
	w.optComposite(a.Source)
	w.optComposite(a.Target)
	w.optMap(a.Unsettled)
	w.optBool(a.IncompleteUnsettled)
	if a.Role == RoleSender {
		w.uint(a.InitialDeliveryCount)
	} else {
		w.nonZeroUint(a.InitialDeliveryCount)
	}
	w.nonZeroUlong(a.MaxMessageSize)
	w.symbols(a.OfferedCapabilities)
	w.symbols(a.DesiredCapabilities)
	w.optMap(a.Properties)
	return w.err
}

func (a *Attach) decodeFields(f *fieldReader) error {
	a.Name = f.mandatoryStr("name")
	a.Handle = f.mandatoryUint("handle")
	a.Role = Role(f.mandatoryBool("role"))
	if v, ok := f.ubyteField(); ok {
		if v > uint8(SenderSettleMixed) {
			f.setErr(malformed("snd-settle-mode %d", v))
		}
		m := SenderSettleMode(v)
		a.SndSettleMode = &m
	}
	if v, ok := f.ubyteField(); ok {
		if v > uint8(ReceiverSettleSecond) {
			f.setErr(malformed("rcv-settle-mode %d", v))
		}
		m := ReceiverSettleMode(v)
		a.RcvSettleMode = &m
	}
	if c := f.compositeField("source", func(code uint64) composite {
		if code == CodeSource {
			return new(Source)
		}
		return nil
	}); c != nil {
		a.Source = c.(*Source)
	}
	if c := f.compositeField("target", func(code uint64) composite {
		if code == CodeTarget {
			return new(Target)
		}
		return nil
	}); c != nil {
		a.Target = c.(*Target)
	}
	a.Unsettled = f.mapField()
	a.IncompleteUnsettled = f.boolean()
	a.InitialDeliveryCount = f.uint()
	a.MaxMessageSize = f.ulong()
	a.OfferedCapabilities = f.symbols()
	a.DesiredCapabilities = f.symbols()
	a.Properties = f.mapField()
	return f.err
}

func (fl *Flow) appendFields(w *listWriter) error {
	w.optUint(fl.NextIncomingID)
	w.uint(fl.IncomingWindow)
	w.uint(fl.NextOutgoingID)
	w.uint(fl.OutgoingWindow)
	w.optUint(fl.Handle)
	w.optUint(fl.DeliveryCount)
	w.optUint(fl.LinkCredit)
	w.optUint(fl.Available)
	w.optBool(fl.Drain)
	w.optBool(fl.Echo)
	w.optMap(fl.Properties)
	return w.err
}

func (fl *Flow) decodeFields(f *fieldReader) error {
	fl.NextIncomingID = f.optUint()
	fl.IncomingWindow = f.mandatoryUint("incoming-window")
	fl.NextOutgoingID = f.mandatoryUint("next-outgoing-id")
	fl.OutgoingWindow = f.mandatoryUint("outgoing-window")
	fl.Handle = f.optUint()
	fl.DeliveryCount = f.optUint()
	fl.LinkCredit = f.optUint()
	fl.Available = f.optUint()
	fl.Drain = f.boolean()
	fl.Echo = f.boolean()
	fl.Properties = f.mapField()
	return f.err
}

func (t *Transfer) appendFields(w *listWriter) error {
	w.uint(t.Handle)
	w.optUint(t.DeliveryID)
	w.optBinary(t.DeliveryTag)
	w.optUint(t.MessageFormat)
	w.optBool(t.Settled)
	w.optBool(t.More)
	if t.RcvSettleMode == nil {
		w.null()
	} else {
		w.ubyte(uint8(*t.RcvSettleMode))
	}
	w.optComposite(t.State)
	w.optBool(t.Resume)
	w.optBool(t.Aborted)
	w.optBool(t.Batchable)
	return w.err
}

func (t *Transfer) decodeFields(f *fieldReader) error {
	t.Handle = f.mandatoryUint("handle")
	t.DeliveryID = f.optUint()
	if tag, ok := f.binaryField(); ok {
		if len(tag) > 32 {
			f.setErr(malformed("delivery-tag of %d bytes (at most 32)", len(tag)))
		}
		t.DeliveryTag = tag
	}
	t.MessageFormat = f.optUint()
	t.Settled = f.boolean()
	t.More = f.boolean()
	if v, ok := f.ubyteField(); ok {
		if v > uint8(ReceiverSettleSecond) {
			f.setErr(malformed("rcv-settle-mode %d", v))
		}
		m := ReceiverSettleMode(v)
		t.RcvSettleMode = &m
	}
	t.State = f.deliveryState()
	t.Resume = f.boolean()
	t.Aborted = f.boolean()
	t.Batchable = f.boolean()
	return f.err
}

func (d *Disposition) appendFields(w *listWriter) error {
	w.boolean(bool(d.Role))
	w.uint(d.First)
	w.optUint(d.Last)
	w.optBool(d.Settled)
	w.optComposite(d.State)
	w.optBool(d.Batchable)
	return w.err
}

func (d *Disposition) decodeFields(f *fieldReader) error {
	d.Role = Role(f.mandatoryBool("role"))
	d.First = f.mandatoryUint("first")
	d.Last = f.optUint()
	d.Settled = f.boolean()
	d.State = f.deliveryState()
	d.Batchable = f.boolean()
	return f.err
}

func (d *Detach) appendFields(w *listWriter) error {
	w.uint(d.Handle)
	w.optBool(d.Closed)
	w.optComposite(d.Error)
	return w.err
}

func (d *Detach) decodeFields(f *fieldReader) error {
	d.Handle = f.mandatoryUint("handle")
	d.Closed = f.boolean()
	d.Error = f.errorField()
	return f.err
}

func (e *End) appendFields(w *listWriter) error {
	w.optComposite(e.Error)
	return w.err
}

func (e *End) decodeFields(f *fieldReader) error {
	e.Error = f.errorField()
	return f.err
}

func (c *Close) appendFields(w *listWriter) error {
	w.optComposite(c.Error)
	return w.err
}

func (c *Close) decodeFields(f *fieldReader) error {
	c.Error = f.errorField()
	return f.err
}

func (e *Error) appendFields(w *listWriter) error {
	w.symbol(e.Condition)
	w.optStr(e.Description)
	w.optMap(e.Info)
	return w.err
}

func (e *Error) decodeFields(f *fieldReader) error {
	e.Condition = f.mandatorySymbol("condition")
	e.Description = f.str()
	e.Info = f.mapField()
	return f.err
}

func (s *Source) appendFields(w *listWriter) error {
	w.optStr(s.Address)
	w.nonZeroUint(s.Durable)
	w.optSymbol(s.ExpiryPolicy)
	w.nonZeroUint(s.Timeout)
	w.optBool(s.Dynamic)
	w.optMap(s.DynamicNodeProperties)
	w.optSymbol(s.DistributionMode)
	w.optMap(s.Filter)
	w.optComposite(s.DefaultOutcome)
	w.symbols(s.Outcomes)
	w.symbols(s.Capabilities)
	return w.err
}

func (s *Source) decodeFields(f *fieldReader) error {
	s.Address = f.str()
	s.Durable = f.uint()
	s.ExpiryPolicy = f.symbol()
	s.Timeout = f.uint()
	s.Dynamic = f.boolean()
	s.DynamicNodeProperties = f.mapField()
	s.DistributionMode = f.symbol()
	s.Filter = f.mapField()
	s.DefaultOutcome = f.deliveryState()
	s.Outcomes = f.symbols()
	s.Capabilities = f.symbols()
	return f.err
}

func (t *Target) appendFields(w *listWriter) error {
	w.optStr(t.Address)
	w.nonZeroUint(t.Durable)
	w.optSymbol(t.ExpiryPolicy)
	w.nonZeroUint(t.Timeout)
	w.optBool(t.Dynamic)
	w.optMap(t.DynamicNodeProperties)
	w.symbols(t.Capabilities)
	return w.err
}

func (t *Target) decodeFields(f *fieldReader) error {
	t.Address = f.str()
	t.Durable = f.uint()
	t.ExpiryPolicy = f.symbol()
	t.Timeout = f.uint()
	t.Dynamic = f.boolean()
	t.DynamicNodeProperties = f.mapField()
	t.Capabilities = f.symbols()
	return f.err
}

func (r *Received) appendFields(w *listWriter) error {
	w.uint(r.SectionNumber)
	w.dst = appendUlong(w.dst, r.SectionOffset)
	w.kept()
	return nil
}

func (r *Received) decodeFields(f *fieldReader) error {
	r.SectionNumber = f.mandatoryUint("section-number")
	r.SectionOffset = f.mandatoryUlong("section-offset")
	return f.err
}

func (*Accepted) appendFields(*listWriter) error { return nil }

func (*Accepted) decodeFields(f *fieldReader) error { return f.err }

func (r *Rejected) appendFields(w *listWriter) error {
	w.optComposite(r.Error)
	return w.err
}

func (r *Rejected) decodeFields(f *fieldReader) error {
	r.Error = f.errorField()
	return f.err
}

func (*Released) appendFields(*listWriter) error { return nil }

func (*Released) decodeFields(f *fieldReader) error { return f.err }

func (m *Modified) appendFields(w *listWriter) error {
	w.optBool(m.DeliveryFailed)
	w.optBool(m.UndeliverableHere)
	w.optMap(m.MessageAnnotations)
	return w.err
}

func (m *Modified) decodeFields(f *fieldReader) error {
	m.DeliveryFailed = f.boolean()
	m.UndeliverableHere = f.boolean()
	m.MessageAnnotations = f.mapField()
	return f.err
}
