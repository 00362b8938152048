// Package gcefake is an in-process fake of the parts of the Compute
// Engine REST API (v1) the gce provider uses, following its wire format:
// instances insert (with requestId, answering a repeated request with its
// first operation), delete, aggregated list with a label filter, zone
// operations that run before they are done, zones; capacity per zone and
// machine type (an operation that ends in ZONE_RESOURCE_POOL_EXHAUSTED),
// a CPU quota (403 quotaExceeded), answers that get lost, and preemption
// of spot instances. Bodies are the API's JSON, read and written with the
// official client's message types. It also serves each instance's
// metadata server (MetadataServer), where everything on a machine reads
// the metadata the instance was made with.
package gcefake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/compute/apiv1/computepb"
	cloudbilling "google.golang.org/api/cloudbilling/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Server is the fake API.
type Server struct {
	*httptest.Server
	mu         sync.Mutex
	project    string
	zones      []string
	instances  map[string]*computepb.Instance // by name
	ops        map[string]*op
	byRequest  map[string]string // requestId -> operation name
	seq        int
	capacity   map[string]int // "zone/machineType" -> instances at most
	quotaCPUs  int
	loseNext   int
	rateLimit  int // inserts still to answer rateLimitExceeded
	inserts    int
	insertReqs int
	skus       []*cloudbilling.Sku
	skuLists   int
}

type op struct {
	proto *computepb.Operation
	polls int
	// fail is the error the operation ends with at its poll (as Compute
	// Engine reports ZONE_RESOURCE_POOL_EXHAUSTED: the insert is
	// accepted, the operation fails later).
	fail *computepb.Error
}

// RateLimitNext answers the next n inserts 403 rateLimitExceeded, as
// Compute Engine does when the project sends more API requests than its
// rate quota allows (the message names the "Queries" quota metric).
func (s *Server) RateLimitNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = n
}

// New starts a fake for one project with the given zones.
func New(project string, zones ...string) *Server {
	s := &Server{project: project, zones: zones, instances: map[string]*computepb.Instance{}, ops: map[string]*op{},
		byRequest: map[string]string{}, capacity: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// SetCapacity bounds the instances of a machine type in a zone.
func (s *Server) SetCapacity(zone, machineType string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity[zone+"/"+machineType] = n
}

// SetQuotaCPUs bounds the project's vCPUs (0: no bound); machine types are
// named n2-standard-N with N vCPUs.
func (s *Server) SetQuotaCPUs(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotaCPUs = n
}

// LoseNextAnswers makes the next n insert requests be carried out but
// answered with 502, as when a connection drops after the server acted.
func (s *Server) LoseNextAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseNext = n
}

// Preempt stops a spot instance, as the cloud does when it takes it back.
func (s *Server) Preempt(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[name]
	if !ok {
		return false
	}
	in.Status = proto.String("TERMINATED")
	return true
}

// Inserts counts instances made; InsertRequests the insert calls.
func (s *Server) Inserts() (made, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inserts, s.insertReqs
}

// Names lists the instances there are.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.instances {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Metadata returns the value of an instance's metadata item, as the
// instance was made with it.
func (s *Server) Metadata(name, key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[name]
	if !ok {
		return "", false
	}
	for _, it := range in.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue(), true
		}
	}
	return "", false
}

// MetadataServer is the metadata server of one instance
// (http://metadata.google.internal on the machine), as anything that runs
// there reaches it: GET /computeMetadata/v1/instance/attributes/KEY with
// the header Metadata-Flavor: Google answers the item's value as text;
// /computeMetadata/v1/instance/name the instance's name.
func (s *Server) MetadataServer(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
			return
		}
		w.Header().Set("Metadata-Flavor", "Google")
		w.Header().Set("Content-Type", "application/text")
		if r.URL.Path == "/computeMetadata/v1/instance/name" {
			_, _ = io.WriteString(w, name)
			return
		}
		key, ok := strings.CutPrefix(r.URL.Path, "/computeMetadata/v1/instance/attributes/")
		if !ok || key == "" {
			http.NotFound(w, r)
			return
		}
		v, ok := s.Metadata(name, key)
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, v)
	})
}

var (
	instancesPath = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances(?:/([^/]+))?$`)
	opPath        = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)$`)
	aggPath       = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/aggregated/instances$`)
	skusPath      = regexp.MustCompile(`^/v1/services/([^/]+)/skus$`)
	zonesPath     = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones$`)
	filterRe      = regexp.MustCompile(`^labels\.([a-z0-9_-]+)\s*=\s*"?([a-z0-9_-]*)"?$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && instancesPath.MatchString(p):
		m := instancesPath.FindStringSubmatch(p)
		s.insert(w, r, m[1], m[2])
	case r.Method == http.MethodDelete && instancesPath.MatchString(p):
		m := instancesPath.FindStringSubmatch(p)
		s.delete(w, r, m[1], m[2], m[3])
	case r.Method == http.MethodGet && opPath.MatchString(p):
		m := opPath.FindStringSubmatch(p)
		o, ok := s.ops[m[3]]
		if !ok || m[1] != s.project {
			apiError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/operations/%s' was not found", m[1], m[2], m[3]))
			return
		}
		// An operation runs for one poll, then is done (with its error,
		// if it fails).
		if o.polls++; o.polls >= 1 && o.proto.GetStatus() != computepb.Operation_DONE {
			o.proto.Status = computepb.Operation_DONE.Enum()
			if o.fail != nil {
				o.proto.HttpErrorStatusCode = proto.Int32(503)
				o.proto.HttpErrorMessage = proto.String("SERVICE UNAVAILABLE")
				o.proto.Error = o.fail
			}
		}
		writeMessage(w, o.proto)
	case r.Method == http.MethodGet && aggPath.MatchString(p):
		s.aggregated(w, r)
	case r.Method == http.MethodGet && zonesPath.MatchString(p):
		list := &computepb.ZoneList{Kind: proto.String("compute#zoneList")}
		for _, z := range s.zones {
			list.Items = append(list.Items, &computepb.Zone{Name: proto.String(z), Status: proto.String("UP"), Kind: proto.String("compute#zone")})
		}
		writeMessage(w, list)
	case r.Method == http.MethodGet && skusPath.MatchString(p):
		s.listSkus(w, r, skusPath.FindStringSubmatch(p)[1])
	default:
		apiError(w, 404, "notFound", "no such endpoint in the fake: "+r.Method+" "+p)
	}
}

func (s *Server) zoneOK(zone string) bool { return slices.Contains(s.zones, zone) }

func (s *Server) newOp(zone, kind, target string) *op {
	s.seq++
	o := &op{proto: &computepb.Operation{Kind: proto.String("compute#operation"), Name: proto.String(fmt.Sprintf("operation-%d", s.seq)),
		Id: proto.Uint64(uint64(s.seq)), OperationType: proto.String(kind), Status: computepb.Operation_RUNNING.Enum(), Progress: proto.Int32(0),
		Zone:       proto.String(s.URL + "/compute/v1/projects/" + s.project + "/zones/" + zone),
		TargetLink: proto.String(s.URL + "/compute/v1/projects/" + s.project + "/zones/" + zone + "/instances/" + target)}}
	s.ops[o.proto.GetName()] = o
	return o
}

func cpusOf(machineType string) int {
	var n int
	if i := strings.LastIndex(machineType, "-"); i >= 0 {
		fmt.Sscanf(machineType[i+1:], "%d", &n)
	}
	return max(n, 1)
}

func (s *Server) insert(w http.ResponseWriter, r *http.Request, project, zone string) {
	s.insertReqs++
	if project != s.project || !s.zoneOK(zone) {
		apiError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s' was not found", project, zone))
		return
	}
	if s.rateLimit > 0 {
		s.rateLimit--
		apiErrorReason(w, 403, "rateLimitExceeded", "usageLimits", fmt.Sprintf("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project_number:%s'.", project))
		return
	}
	body, _ := io.ReadAll(r.Body)
	in := &computepb.Instance{}
	if err := protojson.Unmarshal(body, in); err != nil {
		apiError(w, 400, "invalid", "Invalid JSON payload received. "+err.Error())
		return
	}
	reqID := r.URL.Query().Get("requestId")
	if name, ok := s.byRequest[reqID]; ok && reqID != "" {
		// The same request again: its operation, nothing made twice.
		s.answer(w, s.ops[name].proto)
		return
	}
	if _, ok := s.instances[in.GetName()]; ok {
		apiError(w, 409, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", project, zone, in.GetName()))
		return
	}
	mt := in.GetMachineType()
	if i := strings.LastIndex(mt, "/"); i >= 0 {
		mt = mt[i+1:]
	}
	if s.quotaCPUs > 0 {
		used := 0
		for _, x := range s.instances {
			used += cpusOf(x.GetMachineType())
		}
		if used+cpusOf(mt) > s.quotaCPUs {
			apiErrorReason(w, 403, "quotaExceeded", "usageLimits", fmt.Sprintf("Quota 'CPUS' exceeded.  Limit: %d.0 in region %s.", s.quotaCPUs, zone[:strings.LastIndex(zone, "-")]))
			return
		}
	}
	o := s.newOp(zone, "insert", in.GetName())
	if reqID != "" {
		s.byRequest[reqID] = o.proto.GetName()
	}
	if limit, ok := s.capacity[zone+"/"+mt]; ok {
		n := 0
		for _, x := range s.instances {
			if strings.HasSuffix(x.GetMachineType(), "/"+mt) && strings.HasSuffix(x.GetZone(), "/"+zone) {
				n++
			}
		}
		if n >= limit {
			// Accepted (the insert answers a running operation), then
			// failed: the operation's later poll says so.
			o.fail = &computepb.Error{Errors: []*computepb.Errors{{Code: proto.String("ZONE_RESOURCE_POOL_EXHAUSTED"),
				Message: proto.String(fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", project, zone))}}}
			s.answer(w, o.proto)
			return
		}
	}
	s.seq++
	in.Id = proto.Uint64(uint64(1000 + s.seq))
	in.Zone = proto.String(s.URL + "/compute/v1/projects/" + s.project + "/zones/" + zone)
	in.MachineType = proto.String(s.URL + "/compute/v1/projects/" + s.project + "/zones/" + zone + "/machineTypes/" + mt)
	in.Status = proto.String("RUNNING")
	in.Kind = proto.String("compute#instance")
	s.instances[in.GetName()] = in
	s.inserts++
	s.answer(w, o.proto)
}

// answer writes an operation, or loses the answer (502) when asked to.
func (s *Server) answer(w http.ResponseWriter, o *computepb.Operation) {
	if s.loseNext > 0 {
		s.loseNext--
		apiError(w, 502, "backendError", "the answer was lost (fake)")
		return
	}
	writeMessage(w, o)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, project, zone, name string) {
	in, ok := s.instances[name]
	if !ok || project != s.project || !strings.HasSuffix(in.GetZone(), "/"+zone) {
		apiError(w, 404, "notFound", fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", project, zone, name))
		return
	}
	delete(s.instances, name)
	writeMessage(w, s.newOp(zone, "delete", name).proto)
}

func (s *Server) aggregated(w http.ResponseWriter, r *http.Request) {
	var key, value string
	if f := strings.TrimSpace(r.URL.Query().Get("filter")); f != "" {
		m := filterRe.FindStringSubmatch(f)
		if m == nil {
			apiError(w, 400, "invalid", "Invalid value for field 'filter': '"+f+"'. Invalid list filter expression.")
			return
		}
		key, value = m[1], m[2]
	}
	list := &computepb.InstanceAggregatedList{Kind: proto.String("compute#instanceAggregatedList"), Items: map[string]*computepb.InstancesScopedList{}}
	for _, z := range s.zones {
		sl := &computepb.InstancesScopedList{}
		for _, n := range sortedKeys(s.instances) {
			in := s.instances[n]
			if !strings.HasSuffix(in.GetZone(), "/"+z) || (key != "" && in.GetLabels()[key] != value) {
				continue
			}
			sl.Instances = append(sl.Instances, in)
		}
		if len(sl.Instances) == 0 {
			sl.Warning = &computepb.Warning{Code: proto.String("NO_RESULTS_ON_PAGE"), Message: proto.String("There are no results for scope 'zones/" + z + "' on this page.")}
		}
		list.Items["zones/"+z] = sl
	}
	writeMessage(w, list)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func writeMessage(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(b)
}

// apiError writes Google's JSON error body.
func apiError(w http.ResponseWriter, code int, reason, msg string) {
	apiErrorReason(w, code, reason, "global", msg)
}

func apiErrorReason(w http.ResponseWriter, code int, reason, domain, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []map[string]string{{"message": msg, "domain": domain, "reason": reason}}}})
}

// SetSKUs sets the Catalog's SKUs of Compute Engine (in the order listed).
func (s *Server) SetSKUs(skus []*cloudbilling.Sku) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skus = skus
}

// SKULists counts the pages of SKUs served.
func (s *Server) SKULists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skuLists
}

// computeService is Compute Engine's service ID in the Catalog.
const computeService = "6F81-5844-456A"

// SKU is a Compute Engine SKU as the Catalog lists it: description,
// category (usage type OnDemand or Preemptible), the regions it serves,
// and one pricing with a single tier of dollarsPerUnit per usageUnit
// ("h" for a core-hour, "GiBy.h" for a GiB-hour).
func SKU(id, description, resourceGroup, usageType, region, usageUnit string, dollarsPerUnit float64) *cloudbilling.Sku {
	nanos := int64(dollarsPerUnit*1e9 + 0.5)
	unitDesc := map[string]string{"h": "hour", "GiBy.h": "gibibyte hour"}[usageUnit]
	base := map[string]string{"h": "s", "GiBy.h": "By.s"}[usageUnit]
	return &cloudbilling.Sku{
		Name: "services/" + computeService + "/skus/" + id, SkuId: id, Description: description,
		Category:       &cloudbilling.Category{ServiceDisplayName: "Compute Engine", ResourceFamily: "Compute", ResourceGroup: resourceGroup, UsageType: usageType},
		ServiceRegions: []string{region}, ServiceProviderName: "Google",
		GeoTaxonomy: &cloudbilling.GeoTaxonomy{Type: "REGIONAL", Regions: []string{region}},
		PricingInfo: []*cloudbilling.PricingInfo{{
			EffectiveTime: "2026-11-01T00:00:00Z", CurrencyConversionRate: 1,
			PricingExpression: &cloudbilling.PricingExpression{UsageUnit: usageUnit, UsageUnitDescription: unitDesc, BaseUnit: base,
				BaseUnitDescription: "second", BaseUnitConversionFactor: 3600, DisplayQuantity: 1,
				TieredRates: []*cloudbilling.TierRate{{StartUsageAmount: 0, UnitPrice: &cloudbilling.Money{CurrencyCode: "USD", Units: nanos / 1e9, Nanos: nanos % 1e9}}}},
			AggregationInfo: &cloudbilling.AggregationInfo{AggregationLevel: "ACCOUNT", AggregationInterval: "DAILY", AggregationCount: 1},
		}},
	}
}

// listSkus answers services.skus.list: pageSize (at most 5000, the
// API's default), pageToken, and currencyCode (USD only here, as the
// Catalog's default).
func (s *Server) listSkus(w http.ResponseWriter, r *http.Request, service string) {
	if service != computeService {
		apiErrorReason(w, 404, "notFound", "global", "Service not found: services/"+service)
		return
	}
	q := r.URL.Query()
	if c := q.Get("currencyCode"); c != "" && c != "USD" {
		apiErrorReason(w, 400, "badRequest", "global", "the fake prices in USD only, not "+c)
		return
	}
	size := 5000
	if v := q.Get("pageSize"); v != "" {
		if _, err := fmt.Sscan(v, &size); err != nil || size < 1 {
			apiErrorReason(w, 400, "badRequest", "global", "Invalid pageSize")
			return
		}
		size = min(size, 5000)
	}
	from := 0
	if t := q.Get("pageToken"); t != "" {
		if _, err := fmt.Sscan(t, &from); err != nil || from < 0 || from > len(s.skus) {
			apiErrorReason(w, 400, "badRequest", "global", "Invalid page token")
			return
		}
	}
	to := min(from+size, len(s.skus))
	resp := cloudbilling.ListSkusResponse{Skus: s.skus[from:to]}
	if to < len(s.skus) {
		resp.NextPageToken = fmt.Sprint(to)
	}
	s.skuLists++
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&resp)
}
