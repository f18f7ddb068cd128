package pgwire

import "github.com/prometheus/client_golang/prometheus"

// metrics of the endpoint, on /metrics beside the server's.
type metrics struct {
	sessions *prometheus.GaugeVec   // open sessions
	refused  *prometheus.CounterVec // sessions refused, by SQLSTATE
	queries  *prometheus.CounterVec // statements answered, by SQLSTATE (00000: success)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shredduck_pg_sessions", Help: "Open PostgreSQL sessions."}, nil),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_pg_refused_sessions_total", Help: "PostgreSQL sessions refused, by SQLSTATE."}, []string{"code"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_pg_queries_total", Help: "PostgreSQL statements answered, by SQLSTATE (00000: success)."}, []string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(m.sessions, m.refused, m.queries)
	}
	return m
}
