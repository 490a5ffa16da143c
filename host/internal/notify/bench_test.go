package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// BenchmarkDeliveries measures deliveries to a receiver on 127.0.0.1 that
// answers at once: each is one signed POST and one synced removal from
// the event log. It reports deliveries per second.
func BenchmarkDeliveries(b *testing.B) {
	var got atomic.Int64
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got.Add(1) == int64(b.N) {
			close(all)
		}
	}))
	defer srv.Close()
	s, err := eventlog.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for range b.N {
		commit(b, s, ended, srv.URL)
	}
	d := NewDeliverer(s, Config{Targets: []Target{{URL: srv.URL}}, Secret: []byte("k")}, nil, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	start := time.Now()
	b.ResetTimer()
	go func() {
		defer close(stopped)
		d.Run(ctx)
	}()
	<-all
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
	cancel()
	<-stopped
}
