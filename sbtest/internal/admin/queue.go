package admin

import (
	"net/http"
	"time"

	sdkadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
)

// queueOrTopic serves /{name}: a GET or DELETE finds whichever exists; a PUT's body
// says which kind to create or update.
func (a *Handler) queueOrTopic(r *http.Request, name string) (any, int, error) {
	ns := a.model
	switch r.Method {
	case http.MethodGet:
		if t, ok := ns.Topic(name); ok {
			return a.entry(r, name, name, atom.Content{Topic: a.describeTopic(t)}), http.StatusOK, nil
		}
		if e, ok := ns.Queue(name); ok {
			return a.entry(r, name, name, atom.Content{Queue: a.describeQueue(e)}), http.StatusOK, nil
		}
		return nil, 0, notFound(name)
	case http.MethodDelete:
		defer a.prune()
		if _, ok := ns.Topic(name); ok {
			return nil, http.StatusOK, ns.DeleteTopic(name)
		}
		return nil, http.StatusOK, ns.DeleteQueue(name)
	case http.MethodPut:
		e, err := readEntry(r)
		if err != nil {
			return nil, 0, err
		}
		switch {
		case e.Content.Queue != nil:
			return a.putQueue(r, name, e.Content.Queue)
		case e.Content.Topic != nil:
			return a.putTopic(r, name, e.Content.Topic)
		}
		return nil, 0, bad("The request body has neither a QueueDescription nor a TopicDescription.")
	}
	return nil, 0, methodNotAllowed(r)
}

// putQueue creates or updates (If-Match) the queue called name as d describes.
func (a *Handler) putQueue(r *http.Request, name string, d *atom.QueueDescription) (any, int, error) {
	if err := checkName("queue", name, entityNameRE, entityNameMaxLen); err != nil && !isUpdate(r) {
		return nil, 0, err
	}
	var o Options
	if err := commonOptions(&o, d.LockDuration, d.DefaultMessageTimeToLive, d.MaxDeliveryCount, d.DeadLetteringOnMessageExpiration, d.RequiresSession); err != nil {
		return nil, 0, err
	}
	if err := dupOptions(&o, d.RequiresDuplicateDetection, d.DuplicateDetectionHistoryTimeWindow); err != nil {
		return nil, 0, err
	}
	ns := a.model
	if e, ok := ns.Queue(name); ok && isUpdate(r) {
		prev, _ := lastPut[atom.QueueDescription](a, e.Name(), e)
		if err := fixedAtCreation("Queue", e.Options().DuplicateDetectionWindow > 0, prev.EnablePartitioning != nil && *prev.EnablePartitioning,
			prev.MaxSizeInMegabytes, d.RequiresDuplicateDetection, d.EnablePartitioning, &d.MaxSizeInMegabytes); err != nil {
			return nil, 0, err
		}
	}
	if err := checkReported(d.Status, d.AutoDeleteOnIdle, d.MaxSizeInMegabytes, d.MaxMessageSizeInKilobytes); err != nil {
		return nil, 0, err
	}
	if err := checkKept(d.UserMetadata, d.AuthorizationRules); err != nil {
		return nil, 0, err
	}
	if err := a.forwardOptions(&o, d.ForwardTo, d.ForwardDeadLetteredMessagesTo, name); err != nil {
		return nil, 0, err
	}
	e, status, err := createOrUpdate(r, "Queue", name, &o, d.Status,
		func() (Entity, bool) { return ns.Queue(name) },
		func() (Entity, error) {
			a.creating.Lock()
			defer a.creating.Unlock()
			if _, ok := ns.Topic(name); ok {
				return nil, httpStatus(ErrExists)
			}
			if err := entityQuota(ns); err != nil {
				return nil, err
			}
			return ns.NewQueue(name, &o)
		})
	if err != nil {
		return nil, 0, err
	}
	stored := *d
	a.remember(e.Name(), e, &stored)
	return a.entry(r, name, name, atom.Content{Queue: a.describeQueue(e)}), status, nil
}

// describeQueue reports a queue: the model's options and counts, and the accepted
// properties as last PUT (or their defaults).
func (a *Handler) describeQueue(e Entity) *atom.QueueDescription {
	d, m := lastPut[atom.QueueDescription](a, e.Name(), e)
	o := e.Options()
	reportCommon(o, &d.LockDuration, &d.DefaultMessageTimeToLive, &d.MaxDeliveryCount, &d.DeadLetteringOnMessageExpiration, &d.RequiresSession)
	reportDup(o, &d.RequiresDuplicateDetection, &d.DuplicateDetectionHistoryTimeWindow)
	reportSize(&d.MaxSizeInMegabytes, d.EnablePartitioning)
	def(&d.MaxMessageSizeInKilobytes, defaultMaxMsgKB)
	def(&d.EnableBatchedOperations, true)
	def(&d.EnablePartitioning, false)
	def(&d.EnableExpress, false)                  // the JavaScript admin client requires it (queueResourceSerializer.js)
	d.EntityAvailabilityStatus = ptr("Available") // as the service reports an entity in service
	d.Status = ptr(e.Status())
	reportAutoDelete(&d.AutoDeleteOnIdle, o)
	c := e.Counts()
	d.SizeInBytes, d.MessageCount, d.CountDetails = &c.Size, messageCount(c), countDetails(c)
	d.CreatedAt, d.UpdatedAt, d.AccessedAt = stamp(m.created), stamp(m.updated), accessedStamp(e.AccessedAt())
	return &d
}

// listQueues serves /$Resources/Queues: one page of the namespace's queues.
func (a *Handler) listQueues(r *http.Request, skip, top int) *atom.Feed {
	var entries []atom.Entry
	for _, e := range page(a.model.Queues(), skip, top) {
		entries = append(entries, *a.entry(r, e.Name(), e.Name(), atom.Content{Queue: a.describeQueue(e)}))
	}
	return a.feed(r, "Queues", entries)
}

// putTopic creates or updates (If-Match) the topic called name as d describes.
func (a *Handler) putTopic(r *http.Request, name string, d *atom.TopicDescription) (any, int, error) {
	if err := checkName("topic", name, entityNameRE, entityNameMaxLen); err != nil && !isUpdate(r) {
		return nil, 0, err
	}
	var o Options
	var err error
	if o.DefaultTTL, err = durationField("DefaultMessageTimeToLive", d.DefaultMessageTimeToLive, time.Second, sbkit.MaxTTL); err != nil {
		return nil, 0, err
	}
	if err := dupOptions(&o, d.RequiresDuplicateDetection, d.DuplicateDetectionHistoryTimeWindow); err != nil {
		return nil, 0, err
	}
	ns := a.model
	if t, ok := ns.Topic(name); ok && isUpdate(r) {
		prev, _ := lastPut[atom.TopicDescription](a, t.Name(), t)
		if err := fixedAtCreation("Topic", t.Options().DuplicateDetectionWindow > 0, prev.EnablePartitioning != nil && *prev.EnablePartitioning,
			prev.MaxSizeInMegabytes, d.RequiresDuplicateDetection, d.EnablePartitioning, &d.MaxSizeInMegabytes); err != nil {
			return nil, 0, err
		}
	}
	if err := checkReported(d.Status, d.AutoDeleteOnIdle, d.MaxSizeInMegabytes, d.MaxMessageSizeInKilobytes); err != nil {
		return nil, 0, err
	}
	if err := checkKept(d.UserMetadata, d.AuthorizationRules); err != nil {
		return nil, 0, err
	}
	t, status, err := createOrUpdate(r, "Topic", name, &o, d.Status,
		func() (Topic, bool) { return ns.Topic(name) },
		func() (Topic, error) {
			a.creating.Lock()
			defer a.creating.Unlock()
			if err := entityQuota(ns); err != nil {
				return nil, err
			}
			return ns.NewTopic(name, &o)
		})
	if err != nil {
		return nil, 0, err
	}
	stored := *d
	a.remember(t.Name(), t, &stored)
	return a.entry(r, name, name, atom.Content{Topic: a.describeTopic(t)}), status, nil
}

// describeTopic reports a topic as describeQueue reports a queue; its counts are over
// its subscriptions.
func (a *Handler) describeTopic(t Topic) *atom.TopicDescription {
	d, m := lastPut[atom.TopicDescription](a, t.Name(), t)
	o := t.Options()
	reportDuration(&d.DefaultMessageTimeToLive, o.DefaultTTL)
	reportDup(o, &d.RequiresDuplicateDetection, &d.DuplicateDetectionHistoryTimeWindow)
	reportSize(&d.MaxSizeInMegabytes, d.EnablePartitioning)
	def(&d.MaxMessageSizeInKilobytes, defaultMaxMsgKB)
	def(&d.EnableBatchedOperations, true)
	def(&d.EnablePartitioning, false)
	def(&d.SupportOrdering, true)
	def(&d.EnableExpress, false) // the JavaScript admin client requires it (topicResourceSerializer.js)
	d.EntityAvailabilityStatus = ptr("Available")
	d.Status = ptr(t.Status())
	def(&d.AutoDeleteOnIdle, atom.MaxTimeSpan)
	// The topic's size and scheduled count are its subscriptions' (each holds its own
	// copies here); the filter counts are over every rule of every subscription.
	var size int64
	var scheduled, sqlFilters, corrFilters int32
	subs := t.Subscriptions()
	for _, s := range subs {
		c := s.Counts()
		size += c.Size
		scheduled = max(scheduled, int32(c.Scheduled))
		for _, r := range s.Rules() {
			switch r.Filter.(type) {
			case *sdkadmin.CorrelationFilter:
				corrFilters++
			default:
				sqlFilters++
			}
		}
	}
	d.SizeInBytes = &size
	d.CountDetails = atom.NewCountDetails(0, 0, scheduled)
	d.SubscriptionCount = ptr(int32(len(subs)))
	d.SQLFilterCount, d.CorrelationFilterCount = &sqlFilters, &corrFilters
	d.CreatedAt, d.UpdatedAt, d.AccessedAt = stamp(m.created), stamp(m.updated), accessedStamp(t.AccessedAt())
	return &d
}

// listTopics serves /$Resources/Topics: one page of the namespace's topics.
func (a *Handler) listTopics(r *http.Request, skip, top int) *atom.Feed {
	var entries []atom.Entry
	for _, t := range page(a.model.Topics(), skip, top) {
		entries = append(entries, *a.entry(r, t.Name(), t.Name(), atom.Content{Topic: a.describeTopic(t)}))
	}
	return a.feed(r, "Topics", entries)
}
