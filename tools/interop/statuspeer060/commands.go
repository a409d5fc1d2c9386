package main

// The command loop (as tools/interop/statuspeer), the commands that change this node's settings through
// status-go's own API, each of which status-go announces to its peers as a waku/1 Status Update (code 22), and
// a direct use of status-go's waku/1 option decoder.

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/status-im/status-go/waku/common"
	v1 "github.com/status-im/status-go/waku/v1"
)

func (g *statusPeer) run(do []string) int {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	commands := make(chan string)
	go func() {
		defer close(commands)
		if len(do) > 0 {
			for _, c := range do {
				commands <- c
			}
			return
		}
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			commands <- scanner.Text()
		}
	}()
	for {
		select {
		case sig := <-signals:
			stdout.emit("signal", map[string]interface{}{"signal": sig.String()})
			return 0
		case line, ok := <-commands:
			if !ok {
				return 0
			}
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			if fields[0] == "quit" {
				return 0
			}
			result, err := g.command(fields)
			if err != nil {
				stdout.emit("error", map[string]interface{}{"cmd": line, "error": err.Error()})
				return 1
			}
			if result == nil {
				result = map[string]interface{}{}
			}
			result["cmd"] = line
			stdout.emit("done", result)
		}
	}
}

func argUint(f []string, i int) (uint32, error) {
	if len(f) <= i {
		return 0, fmt.Errorf("%s: missing argument %d", f[0], i)
	}
	v, err := strconv.ParseUint(f[i], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: argument %d: %v", f[0], i, err)
	}
	return uint32(v), nil
}

func argSeconds(f []string, i int) (time.Duration, error) {
	if len(f) <= i {
		return 0, fmt.Errorf("%s: missing timeout (seconds)", f[0])
	}
	v, err := strconv.ParseFloat(f[i], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: timeout: %v", f[0], err)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func (g *statusPeer) command(f []string) (map[string]interface{}, error) {
	switch f[0] {
	case "wait-peer":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, "a ready waku peer", func() bool { return len(g.ready) > 0 }); err != nil {
			return nil, err
		}
		return map[string]interface{}{"id": g.lastReady().ID().String()}, nil
	case "post":
		n, err := argUint(f, 1)
		if err != nil {
			return nil, err
		}
		return g.post(int(n))
	case "request", "request-asym", "request-plain", "request-topics":
		return g.request(f)
	case "wait-complete":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		id := g.lastRequest
		g.mu.Unlock()
		if err := g.waitFor(d, "completion of request "+id, func() bool { _, ok := g.completed[id]; return ok }); err != nil {
			return nil, err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		c := g.completed[id]
		return map[string]interface{}{"request": id, "last": c.last, "cursor": c.cursor, "error": c.err,
			"envelopes": append([]string{}, g.page...)}, nil
	case "wait-messages":
		n, err := argUint(f, 1)
		if err != nil {
			return nil, err
		}
		d, err := argSeconds(f, 2)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, fmt.Sprintf("%d envelopes", n), func() bool { return len(g.delivered) >= int(n) }); err != nil {
			return nil, err
		}
		return map[string]interface{}{"count": n}, nil
	case "subscribe", "set-bloom", "set-pow", "light-update":
		return g.settingsCommand(f)
	case "decode-options":
		if len(f) < 2 {
			return nil, fmt.Errorf("decode-options HEX")
		}
		return decodeOptions(f[1])
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

// settingsCommand changes a setting with status-go's API; status-go notifies its peers itself.
func (g *statusPeer) settingsCommand(f []string) (map[string]interface{}, error) {
	if len(f) < 2 {
		return nil, fmt.Errorf("%s: missing argument", f[0])
	}
	switch f[0] {
	case "subscribe":
		t, err := parseTopic(f[1])
		if err != nil {
			return nil, err
		}
		return nil, g.subscribe(t)
	case "set-bloom":
		bloom := make([]byte, common.BloomFilterSize)
		for _, text := range f[1:] {
			t, err := parseTopic(text)
			if err != nil {
				return nil, err
			}
			for i, b := range t.ToBloom() { // waku.go addBloom
				bloom[i] |= b
			}
		}
		return map[string]interface{}{"bloom": hex.EncodeToString(bloom)}, g.w.SetBloomFilter(bloom)
	case "set-pow":
		pow, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("set-pow: %v", err)
		}
		return nil, g.w.SetMinimumPoW(pow, false)
	}
	// light-update: status-go v0.60.0 has no API that announces a light-mode change (LightNodeEnabled is only
	// in the handshake Status), so the Status Update is written here, with status-go's v1.StatusOptions
	// encoder, on every session's stream (through the tap).
	light, err := strconv.ParseBool(f[1])
	if err != nil {
		return nil, fmt.Errorf("light-update: %v", err)
	}
	payload, err := rlp.EncodeToBytes(v1.StatusOptions{LightNodeEnabled: &light})
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	sessions := make([]*tappedRW, 0, len(g.sessions))
	for _, rw := range g.sessions {
		sessions = append(sessions, rw)
	}
	g.mu.Unlock()
	if len(sessions) == 0 {
		return nil, fmt.Errorf("light-update: no session")
	}
	for _, rw := range sessions {
		if err := p2p.Send(rw, statusUpdateCode, rlp.RawValue(payload)); err != nil {
			return nil, fmt.Errorf("light-update: %v", err)
		}
	}
	return map[string]interface{}{"payload": hex.EncodeToString(payload), "sessions": len(sessions)}, nil
}

func (g *statusPeer) waitFor(d time.Duration, what string, cond func() bool) error {
	timer := time.AfterFunc(d, func() {
		g.mu.Lock()
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	for !cond() {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		g.changed.Wait()
	}
	return nil
}

func (g *statusPeer) lastReady() *p2p.Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.ready) - 1; i >= 0; i-- {
		if g.sessions[g.ready[i].ID()] != nil {
			return g.ready[i]
		}
	}
	return nil
}

func (g *statusPeer) post(n int) (map[string]interface{}, error) {
	hashes := make([]string, 0, n)
	for i := 0; i < n; i++ {
		params := common.MessageParams{
			TTL: uint32(g.s.ttl), Src: g.key, KeySym: g.symKey, Topic: g.s.topic, PoW: g.s.pow,
			WorkTime: uint32(g.s.workTime), Payload: []byte(fmt.Sprintf("%s #%d", g.s.payload, i)),
		}
		msg, err := common.NewSentMessage(&params)
		if err != nil {
			return nil, err
		}
		env, err := msg.Wrap(&params, time.Now())
		if err != nil {
			return nil, err
		}
		raw, err := rlp.EncodeToBytes(env)
		if err != nil {
			return nil, err
		}
		h := hex.EncodeToString(env.Hash().Bytes())
		g.mu.Lock()
		g.posted[h] = true
		g.mu.Unlock()
		if err := g.w.Send(env); err != nil {
			return nil, fmt.Errorf("Send: %v", err)
		}
		hashes = append(hashes, h)
		stdout.emit("posted", map[string]interface{}{
			"hash": h, "raw": hex.EncodeToString(raw), "expiry": env.Expiry, "ttl": env.TTL,
			"sent": env.Expiry - env.TTL, "topic": "0x" + hex.EncodeToString(env.Topic[:]), "nonce": env.Nonce,
			"pow": env.PoW(), "payload": string(params.Payload),
		})
	}
	return map[string]interface{}{"count": n, "hashes": hashes}, nil
}

// decodeOptions runs status-go's own waku/1 StatusOptions decoder (waku/v1/status_options.go DecodeRLP) on a
// payload the way handshake reads a Status (rlp.NewStream(payload, size).Decode; handleStatusUpdateCode's
// packet.Decode is the same Stream.Decode) — neither checks for unread input after the value — and reports
// what it kept; absent options are omitted.
func decodeOptions(text string) (map[string]interface{}, error) {
	payload, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("decode-options: %v", err)
	}
	var o v1.StatusOptions
	if err := rlp.NewStream(bytes.NewReader(payload), uint64(len(payload))).Decode(&o); err != nil {
		return map[string]interface{}{"error": err.Error()}, nil
	}
	opts := map[string]interface{}{}
	if pow := o.PoWRequirementF(); pow != nil {
		opts["0"] = *pow
	}
	if o.BloomFilter != nil {
		opts["1"] = hex.EncodeToString(o.BloomFilter)
	}
	if o.LightNodeEnabled != nil {
		opts["2"] = *o.LightNodeEnabled
	}
	if o.ConfirmationsEnabled != nil {
		opts["3"] = *o.ConfirmationsEnabled
	}
	if o.PacketRateLimits != nil {
		opts["4"] = []uint64{o.PacketRateLimits.IPLimits, o.PacketRateLimits.PeerIDLimits, o.PacketRateLimits.TopicLimits}
	}
	if o.TopicInterest != nil {
		topics := []string{}
		for _, t := range o.TopicInterest {
			topics = append(topics, hex.EncodeToString(t[:]))
		}
		opts["5"] = topics
	}
	if o.BytesRateLimits != nil {
		opts["6"] = []uint64{o.BytesRateLimits.IPLimits, o.BytesRateLimits.PeerIDLimits, o.BytesRateLimits.TopicLimits}
	}
	return map[string]interface{}{"options": opts}, nil
}
