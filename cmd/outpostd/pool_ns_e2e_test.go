package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/rendezvous"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// A registrar pool of three boxes on one LAN, built in namespaces:
//
//	ns a (198.18.60.1) ─┐
//	ns b (198.18.60.2) ─┼─ ns lan (bridge br0) ─ ns phone (198.18.60.20-.23: SIPp phones)
//	ns c (198.18.60.3) ─┘
//
// Every box gets the same document but pool.self.
const (
	poolPhones  = "198.18.60.20" // the phones that register in bulk
	poolCaller  = "198.18.60.21"
	poolCallee  = "198.18.60.22"
	poolUsers   = 300
	poolHoldS   = 2
	poolProbeMS = 300
)

var poolBoxes = []struct{ name, ns, ip string }{
	{"box-a", "a", "198.18.60.1"}, {"box-b", "b", "198.18.60.2"}, {"box-c", "c", "198.18.60.3"},
}

type poolLAN struct {
	regRate int // SIPp's registrations per second; 0 = 200
	tp      *netnstest.Topology
	docs    map[string]string // member name -> config file
	data    map[string]string // member name -> data dir
	d       map[string]*daemon
}

func newPoolLAN(t *testing.T) *poolLAN { return newPoolOf(t, len(poolBoxes), poolUsers, true) }

// newPoolOf is the LAN with the first n boxes, users users, and a pool
// section when pooled (else each box is on its own).
func newPoolOf(t *testing.T, n, users int, pooled bool, extra ...func(map[string]any)) *poolLAN {
	t.Helper()
	boxes := poolBoxes[:n]
	tp := netnstest.New(t)
	tp.IP("lan", "link", "add", "br0", "type", "bridge")
	tp.Up("lan", "br0")
	attach := func(ns, port string, cidrs ...string) {
		tp.Veth(ns, "lan0", "lan", port)
		tp.IP("lan", "link", "set", port, "master", "br0")
		tp.Up("lan", port)
		for _, c := range cidrs {
			tp.Addr(ns, "lan0", c)
		}
		tp.Up(ns, "lan0")
	}
	for _, b := range boxes {
		attach(b.ns, "p"+b.ns, b.ip+"/24")
	}
	attach("phone", "pphone", poolPhones+"/24", poolCaller+"/24", poolCallee+"/24")
	l := &poolLAN{tp: tp, docs: map[string]string{}, data: map[string]string{}, d: map[string]*daemon{}}
	var members []map[string]any
	for _, b := range boxes {
		members = append(members, map[string]any{"name": b.name, "target": "udp:" + b.ip + ":5060"})
	}
	for _, b := range boxes {
		doc := benchDoc(users, []string{"udp:" + b.ip + ":5060"}, func(m map[string]any) {
			m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
			for _, f := range extra {
				f(m)
			}
			if !pooled {
				return
			}
			probeMS, downAfter := poolProbeMS, 2
			if raceEnabled {
				// A -race build on two shared cores answers OPTIONS late
				// under the registration load: give the probes room.
				probeMS, downAfter = 3*poolProbeMS, 3
			}
			m["pool"] = map[string]any{"self": b.name, "members": members, "options_interval_ms": probeMS,
				"down_after": downAfter, "up_after": 2, "hold_s": poolHoldS, "secret": "shared-between-members"}
		})
		l.docs[b.name] = writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
		l.data[b.name] = t.TempDir()
	}
	return l
}

func (l *poolLAN) start(t *testing.T, name string) *daemon {
	t.Helper()
	for _, b := range poolBoxes {
		if b.name == name {
			d := startDaemonIn(t, l.tp.NS(b.ns), l.data[name], l.docs[name])
			l.d[name] = d
			return d
		}
	}
	t.Fatalf("no member %s", name)
	return nil
}

func (l *poolLAN) rate() int {
	if l.regRate == 0 {
		return 200
	}
	return l.regRate
}

func memberIP(name string) string {
	for _, b := range poolBoxes {
		if b.name == name {
			return b.ip
		}
	}
	return ""
}

// order is user's members, primary first, computed independently of the
// boxes (the hash is the contract).
func order(user string) []string {
	var names []string
	for _, b := range poolBoxes {
		names = append(names, b.name)
	}
	return rendezvous.Order("sip:"+user+"@bench.local", names)
}

// memberOf finds member's state in a status.
func memberOf(s api.Status, member string) (api.PoolMember, bool) {
	if s.Pool == nil {
		return api.PoolMember{}, false
	}
	for _, m := range s.Pool.Members {
		if m.Name == member {
			return m, true
		}
	}
	return api.PoolMember{}, false
}

// registerVia registers users (SIPp, reg_pool.xml: follows 301) from
// ip:5060 in the phone namespace (calls go where the REGISTER came from),
// sending every first REGISTER to member.
func (l *poolLAN) registerVia(t *testing.T, member, ip string, users []string, extra ...string) (string, error) {
	t.Helper()
	return l.registerWith(t, "reg_pool.xml", member, ip, users, extra...)
}

// registerWith is registerVia with another registration scenario.
func (l *poolLAN) registerWith(t *testing.T, scenario, member, ip string, users []string, extra ...string) (string, error) {
	t.Helper()
	var b strings.Builder
	b.WriteString("SEQUENTIAL\n")
	for _, u := range users {
		fmt.Fprintf(&b, "%s;[authentication username=%s password=pw%s];3600;%s:5060\n", u, u, strings.TrimPrefix(u, "user"), ip)
	}
	csv := filepath.Join(t.TempDir(), "users.csv")
	if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-i", ip, "-p", "5060"}, extra...)
	return sippIn(t, l.tp.NS("phone"), scenario, memberIP(member)+":5060", csv, len(users), l.rate(), args...)
}

// call places one call from user caller through member to callee.
func (l *poolLAN) call(t *testing.T, member, caller, callee string) error {
	t.Helper()
	return l.callWith(t, "uac_call.xml", member, caller, callee)
}

// callWith is call with another caller scenario.
func (l *poolLAN) callWith(t *testing.T, scenario, member, caller, callee string) error {
	t.Helper()
	csv := filepath.Join(t.TempDir(), "caller.csv")
	line := fmt.Sprintf("SEQUENTIAL\n%s;[authentication username=%s password=pw%s];0;%s\n", caller, caller, strings.TrimPrefix(caller, "user"), callee)
	if err := os.WriteFile(csv, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sippIn(t, l.tp.NS("phone"), scenario, memberIP(member)+":5060", csv, 1, 10, "-i", poolCaller, "-p", "5060", "-recv_timeout", "4000")
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(out, 1500))
	}
	return nil
}

// phone is the callee's SIPp: it registers from poolCallee:5060, then
// answers calls there.
type phone struct {
	l    *poolLAN
	user string
	uas  *sippServer
}

// register (re-)registers the callee through member, its answering SIPp
// stopped meanwhile (both use its one address).
func (p *phone) register(t *testing.T, member string, extra ...string) error {
	t.Helper()
	if p.uas != nil {
		p.uas.stop()
		p.uas = nil
	}
	out, err := p.l.registerVia(t, member, poolCallee, []string{p.user}, extra...)
	p.uas = startSIPpServer(t, p.l.tp, "phone", poolCallee, "uas_answer_each.xml")
	if err != nil {
		return fmt.Errorf("%s via %s: %w\n%s", p.user, member, err, tail(out, 1500))
	}
	return nil
}

func userName(i int) string { return fmt.Sprintf("user%04d", i) }

// pickUser is the first user (from start) whose primary is member.
func pickUser(member string, start int) string {
	for i := start; i < poolUsers; i++ {
		if order(userName(i))[0] == member {
			return userName(i)
		}
	}
	return ""
}

func TestPoolInNamespaces(t *testing.T) {
	needSIPp(t)
	l := newPoolLAN(t)
	for _, b := range poolBoxes {
		l.start(t, b.name)
	}
	allUp := func(s api.Status) bool {
		if s.Pool == nil || len(s.Pool.Members) != len(poolBoxes) {
			return false
		}
		for _, m := range s.Pool.Members {
			if !m.Up || !m.Serving {
				return false
			}
		}
		return true
	}
	for _, b := range poolBoxes {
		l.d[b.name].waitFor(b.name+": every member up", 10*time.Second, allUp)
	}

	// (1) 300 phones register, every first REGISTER at box-a: those homed
	// elsewhere are sent there by 301 and register at their home.
	var users []string
	homes := map[string]int{}
	for i := range poolUsers {
		users = append(users, userName(i))
		homes[order(userName(i))[0]]++
	}
	start := time.Now()
	if out, err := l.registerVia(t, "box-a", poolPhones, users); err != nil {
		t.Fatalf("registering %d phones through box-a: %v\n%s", poolUsers, err, tail(out, 3000))
	}
	figure(t, fmt.Sprintf("pool of 3: %d phones registered through one member (301 followed)", poolUsers), time.Since(start))
	for _, b := range poolBoxes {
		want := homes[b.name]
		l.d[b.name].waitFor(b.name+": its users registered here", 5*time.Second, func(s api.Status) bool {
			return s.Pool != nil && s.Pool.HomedHere == want && s.Pool.ServedAsBackup == 0 && s.AORs == want
		})
	}
	t.Logf("users per member: %v", homes)

	// (2) A call from a user on box-a to a user homed on box-b goes to b.
	callee := pickUser("box-b", 0)
	caller := pickUser("box-a", 0)
	ph := &phone{l: l, user: callee}
	if err := ph.register(t, "box-a"); err != nil {
		t.Fatal(err)
	}
	defer func() { ph.uas.stop() }()
	if err := l.call(t, "box-a", caller, callee); err != nil {
		t.Fatalf("call %s (box-a) -> %s (homed on box-b): %v", caller, callee, err)
	}

	// (3) box-b dies. Its phones retry at their backup (the next member of
	// their order) once a second; the backup takes them once its probes
	// call b down, and calls follow.
	backup := order(callee)[1]
	var bUsers []string
	for _, u := range users {
		if order(u)[0] == "box-b" {
			bUsers = append(bUsers, u)
		}
	}
	killed := time.Now()
	l.d["box-b"].cmd.Process.Signal(syscall.SIGKILL)
	<-l.d["box-b"].done
	reachable := false
	var lastErr error
	for time.Since(killed) < 15*time.Second {
		if err := ph.register(t, backup, "-recv_timeout", "1000"); err != nil {
			lastErr = err
		} else if err := l.call(t, "box-a", caller, callee); err != nil {
			lastErr = fmt.Errorf("call: %w", err)
		} else {
			reachable = true
			break
		}
		time.Sleep(time.Second) // the phone's retry interval
	}
	if !reachable {
		t.Fatalf("%s (homed on dead box-b) not reachable through its backup %s within 15 s: %v", callee, backup, lastErr)
	}
	probeMS, downAfter := poolProbeMS, 2
	if raceEnabled {
		probeMS, downAfter = 3*poolProbeMS, 3
	}
	figure(t, fmt.Sprintf("pool: member death to its user reachable again (probes %d ms x %d, phone retry 1 s)", probeMS, downAfter), time.Since(killed))
	// The rest of b's phones re-register at their backups.
	byBackup := map[string][]string{}
	for _, u := range bUsers {
		byBackup[order(u)[1]] = append(byBackup[order(u)[1]], u)
	}
	for m, us := range byBackup {
		if out, err := l.registerVia(t, m, poolPhones, us); err != nil {
			t.Fatalf("box-b's phones at their backup %s: %v\n%s", m, err, tail(out, 3000))
		}
	}
	for m, us := range byBackup {
		n := len(us)
		if m == backup {
			n-- // the callee registered from its own address: counted among them already
		}
		l.d[m].waitFor(m+": serves box-b's users as backup", 5*time.Second, func(s api.Status) bool {
			return s.Pool != nil && s.Pool.ServedAsBackup >= n
		})
	}

	// (4) box-b comes back. After the hold, its users' refreshes at the
	// backup are answered 301 and the backup lets the bindings go.
	l.start(t, "box-b")
	for _, m := range []string{"box-a", "box-c"} { // each member's own probes and hold
		l.d[m].waitFor(m+": box-b serving again after the hold", time.Duration(poolHoldS+5)*time.Second, func(s api.Status) bool {
			mb, ok := memberOf(s, "box-b")
			return ok && mb.Up && mb.Serving
		})
	}
	for m, us := range byBackup {
		if out, err := l.registerVia(t, m, poolPhones, us); err != nil {
			t.Fatalf("failback of box-b's phones from %s: %v\n%s", m, err, tail(out, 3000))
		}
	}
	if err := ph.register(t, backup); err != nil {
		t.Fatalf("failback: %v", err)
	}
	for m := range byBackup {
		l.d[m].waitFor(m+": box-b's bindings handed back", 5*time.Second, func(s api.Status) bool {
			return s.Pool != nil && s.Pool.ServedAsBackup == 0 && s.Registrar.HandedOver > 0
		})
	}
	l.d["box-b"].waitFor("box-b: its users home again", 5*time.Second, func(s api.Status) bool {
		return s.Pool != nil && s.Pool.HomedHere == homes["box-b"]
	})
	if err := l.call(t, "box-a", caller, callee); err != nil {
		t.Fatalf("call to %s after failback: %v", callee, err)
	}

	// (5) box-c is cut off from the other members, not from the phones:
	// each side sees the other down; c keeps serving its users, and the
	// others take c's users that reach them.
	for _, other := range []string{"198.18.60.1", "198.18.60.2"} {
		l.tp.Route("c", "add", "blackhole", other+"/32")
	}
	for _, m := range []string{"box-a", "box-b"} {
		l.d[m].waitFor(m+": box-c down", 5*time.Second, func(s api.Status) bool {
			mc, ok := memberOf(s, "box-c")
			return ok && !mc.Up
		})
	}
	l.d["box-c"].waitFor("box-c: the others down", 5*time.Second, func(s api.Status) bool {
		ma, _ := memberOf(s, "box-a")
		mb, _ := memberOf(s, "box-b")
		return !ma.Up && !mb.Up
	})
	ph.uas.stop()
	cUser := pickUser("box-c", 0)
	if out, err := l.registerVia(t, "box-c", poolCallee, []string{cUser}); err != nil {
		t.Fatalf("%s at its partitioned home box-c: %v\n%s", cUser, err, tail(out, 2000))
	}
	aUser := pickUser("box-a", 1)
	if out, err := l.registerVia(t, "box-c", poolCallee, []string{aUser}); err != nil {
		t.Fatalf("%s (homed on box-a) at partitioned box-c: %v\n%s", aUser, err, tail(out, 2000))
	}
	ph.uas = startSIPpServer(t, l.tp, "phone", poolCallee, "uas_answer_each.xml")
	if s := l.d["box-c"].status(); s.Pool.ServedAsBackup < 1 {
		t.Fatalf("box-c in a partition does not serve box-a's user: %+v", s.Pool)
	}
}

// TestPoolRegistrationRate compares the registration rate of one box with
// that of a pool of two: the same phones, every REGISTER first sent to a
// member chosen by the phone (half to each), SIPp as fast as the boxes
// answer. Both boxes share this machine's cores with SIPp, so the figure
// shows the cost of the 301s more than the capacity a second box adds.
func TestPoolRegistrationRate(t *testing.T) {
	needSIPp(t)
	const users = 4000
	var all []string
	for i := range users {
		all = append(all, userName(i))
	}
	run := func(name string, pooled bool, n int) {
		// No storm guard: the figure is what the boxes answer, not the
		// guard's 2000 new registrations/s per box.
		l := newPoolOf(t, n, users, pooled, func(m map[string]any) {
			m["sip"].(map[string]any)["registrar"] = map[string]any{"storm_rate": -1}
		})
		l.regRate = 20000 // above what the boxes answer: SIPp keeps at most 200 in flight (-l)
		for _, b := range poolBoxes[:n] {
			l.start(t, b.name)
		}
		if pooled {
			for _, b := range poolBoxes[:n] {
				l.d[b.name].waitFor(b.name+": members up", 10*time.Second, func(s api.Status) bool {
					return s.Pool != nil && s.Pool.Members[0].Up && s.Pool.Members[1].Up
				})
			}
		}
		// Two SIPp instances (two phone addresses), half the phones each:
		// to box-a and box-b in the pool, both to box-a alone.
		start := time.Now()
		errs := make(chan error, 2)
		ips := []string{poolPhones, poolCaller}
		for i := range 2 {
			part := all[i*users/2 : (i+1)*users/2]
			go func() {
				out, err := l.registerVia(t, poolBoxes[i%n].name, ips[i], part, "-l", "200")
				if err != nil {
					err = fmt.Errorf("%w\n%s", err, tail(out, 2000))
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		el := time.Since(start)
		figure(t, name+fmt.Sprintf(": %d registrations", users), el)
		t.Logf("%s: %.0f registrations/s", name, float64(users)/el.Seconds())
		for _, b := range poolBoxes[:n] {
			l.d[b.name].stop()
		}
	}
	run("one box", false, 1)
	run("pool of 2", true, 2)
}

// TestPoolDrainHandsUsersOver: outpostctl drain on a pool member hands
// its users over. Its OPTIONS answers turn 503, so the other members take
// it out of service; its users' refreshes are answered 301 to their
// backup, where they register; its drain status counts the users still
// registered there and says drained when none is left. A new call from
// one of them that still reaches it is redirected (302) to the member the
// phone now registers at, where it goes through; that member's answers
// to the phone's refreshes say it serves as backup.
func TestPoolDrainHandsUsersOver(t *testing.T) {
	needSIPp(t)
	const users = 30
	l := newPoolOf(t, len(poolBoxes), users, true)
	for _, b := range poolBoxes {
		l.start(t, b.name)
	}
	for _, b := range poolBoxes {
		l.d[b.name].waitFor(b.name+": every member serving", 10*time.Second, func(s api.Status) bool {
			if s.Pool == nil || len(s.Pool.Members) != len(poolBoxes) {
				return false
			}
			for _, m := range s.Pool.Members {
				if !m.Serving {
					return false
				}
			}
			return true
		})
	}
	var aUsers []string
	for i := range users {
		if u := userName(i); order(u)[0] == "box-a" {
			aUsers = append(aUsers, u)
		}
	}
	if len(aUsers) == 0 {
		t.Fatal("no user is homed at box-a")
	}
	callee := ""
	for i := range users {
		if u := userName(i); order(u)[0] == "box-b" {
			callee = u
			break
		}
	}
	if callee == "" {
		t.Fatal("no user is homed at box-b")
	}
	answering := &phone{l: l, user: callee}
	if err := answering.register(t, "box-b"); err != nil {
		t.Fatal(err)
	}
	if out, err := l.registerVia(t, "box-a", poolPhones, aUsers); err != nil {
		t.Fatalf("box-a's users at box-a: %v\n%s", err, tail(out, 2000))
	}
	a := l.d["box-a"]
	out, err := a.ctl("drain")
	if want := fmt.Sprintf("%d users registered here", len(aUsers)); err != nil || !strings.Contains(out, want) {
		t.Fatalf("outpostctl drain: %v\n%s\nwant %q", err, out, want)
	}
	for _, m := range []string{"box-b", "box-c"} {
		l.d[m].waitFor(m+": box-a out of service while it drains", 10*time.Second, func(s api.Status) bool {
			ma, ok := memberOf(s, "box-a")
			return ok && !ma.Serving
		})
	}
	// The phones refresh at box-a: each is sent to its backup.
	if out, err := l.registerVia(t, "box-a", poolPhones, aUsers); err != nil {
		t.Fatalf("box-a's users refreshing while it drains: %v\n%s", err, tail(out, 2000))
	}
	st, err := a.api.Drain(t.Context(), true, false)
	if err != nil || st.Registered != 0 || !st.Drained {
		t.Fatalf("box-a's drain status after its phones refreshed: %+v %v; want none registered, drained", st, err)
	}
	backups := 0
	for _, m := range []string{"box-b", "box-c"} {
		backups += l.d[m].status().Pool.ServedAsBackup
	}
	if backups != len(aUsers) {
		t.Errorf("box-a's %d users served as backup elsewhere: %d", len(aUsers), backups)
	}
	caller := aUsers[0]
	if out, err := l.registerWith(t, "reg_backup.xml", order(caller)[1], poolPhones, []string{caller}); err != nil {
		t.Errorf("%s refreshing at its backup %s: %v\n%s", caller, order(caller)[1], err, tail(out, 2000))
	}
	if err := l.callWith(t, "uac_moved.xml", "box-a", caller, callee); err != nil {
		t.Errorf("%s calling %s through box-a while it drains: %v", caller, callee, err)
	}
}
