// Command go_sdk_cancel drives a Wire engine through the published Go SDK
// (github.com/MoonshotAI/kimi-agent-sdk/go) and times the cancel of a turn whose
// tool runs `sleep 30`. bench/go_sdk_cancel.py builds it offline and runs it.
//
// One run: start the engine with the SDK (auto-approve), prompt, wait for the
// Shell tool's `sleep` process, then cancel with turn.Cancel() (-mode turn) or by
// cancelling the prompt's context (-mode context). It prints one JSON line with
// the milliseconds from the cancel to: turn.Cancel() returning, the turn's Steps
// channel closing (the turn's end as the SDK shows it), and the `sleep` being
// gone; plus the signal state the engine and the `sleep` were started with.
// -mode finish cancels nothing: the model answers with text, and the time is
// from that text reaching the consumer to the Steps channel closing.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	kimi "github.com/MoonshotAI/kimi-agent-sdk/go"
	"github.com/MoonshotAI/kimi-agent-sdk/go/wire"
)

type result struct {
	Mode          string  `json:"mode"`
	CancelReturns float64 `json:"cancel_returns_ms"`
	StepsClosed   float64 `json:"steps_closed_ms"`
	SleepGone     float64 `json:"sleep_gone_ms"`
	SessionClose  float64 `json:"session_close_ms"`
	Status        string  `json:"status"`
	Err           string  `json:"err,omitempty"`
	Engine        procSig `json:"engine_proc"`
	Sleep         procSig `json:"sleep_proc"`
}

// procSig is a process's signal state as /proc shows it (hex masks).
type procSig struct {
	PID    int    `json:"pid"`
	SigIgn string `json:"sig_ign"`
	SigBlk string `json:"sig_blk"`
	PGID   int    `json:"pgid"`
}

func main() {
	engine := flag.String("engine", "", "the engine executable (soulwire or kimi)")
	config := flag.String("config-file", "", "the engine's config file")
	work := flag.String("work-dir", "", "the session's work dir (the sleep runs there)")
	mode := flag.String("mode", "turn", "turn: turn.Cancel(); context: cancel the prompt's context")
	flag.Parse()
	if *engine == "" || *config == "" || *work == "" || (*mode != "turn" && *mode != "context" && *mode != "finish") {
		fmt.Fprintln(os.Stderr, "usage: go_sdk_cancel -engine PATH -config-file FILE -work-dir DIR [-mode turn|context|finish]")
		os.Exit(2)
	}
	out, err := run(*engine, *config, *work, *mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_sdk_cancel:", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func run(engine, config, work, mode string) (*result, error) {
	session, err := kimi.NewSession(
		kimi.WithExecutable(engine),
		kimi.WithConfigFile(config),
		kimi.WithWorkDir(work),
		kimi.WithAutoApprove(),
	)
	if err != nil {
		return nil, fmt.Errorf("start the engine: %w", err)
	}
	ctx, cancelCtx := context.WithCancel(context.Background())
	defer cancelCtx()
	turn, err := session.Prompt(ctx, wire.NewStringContent("go"))
	if err != nil {
		session.Close()
		return nil, fmt.Errorf("prompt: %w", err)
	}
	toolCalled := make(chan struct{}, 1)
	texted := make(chan time.Time, 1)
	stepsClosed := make(chan time.Time, 1)
	go func() { // the consumer every SDK user writes: read every step's messages
		for step := range turn.Steps {
			for msg := range step.Messages {
				switch m := msg.(type) {
				case wire.ToolCall:
					select {
					case toolCalled <- struct{}{}:
					default:
					}
				case wire.ContentPart:
					select {
					case texted <- time.Now():
					default:
					}
				case wire.ApprovalRequest: // auto-approve should make none
					m.Respond(wire.ApprovalRequestResponseApprove)
				}
			}
		}
		stepsClosed <- time.Now()
	}()
	if mode == "finish" {
		return finish(session, turn, texted, stepsClosed)
	}
	select {
	case <-toolCalled:
	case <-time.After(60 * time.Second):
		session.Close()
		return nil, fmt.Errorf("no ToolCall within 60 s")
	}
	sleepPID, err := waitForSleep(work, 60*time.Second)
	if err != nil {
		session.Close()
		return nil, err
	}
	out := &result{Mode: mode, Sleep: signalState(sleepPID), Engine: signalState(childOf(os.Getpid()))}
	gone := make(chan time.Time, 1)
	go func() {
		for alive(sleepPID) {
			time.Sleep(500 * time.Microsecond)
		}
		gone <- time.Now()
	}()
	started := time.Now()
	if mode == "turn" {
		if err := turn.Cancel(); err != nil {
			out.Err = err.Error()
		}
		out.CancelReturns = ms(time.Since(started))
	} else {
		cancelCtx()
	}
	select {
	case at := <-stepsClosed:
		out.StepsClosed = ms(at.Sub(started))
	case <-time.After(60 * time.Second):
		out.StepsClosed = -1
	}
	select {
	case at := <-gone:
		out.SleepGone = ms(at.Sub(started))
	case <-time.After(60 * time.Second):
		out.SleepGone = -1
	}
	out.Status = string(turn.Result().Status)
	if err := turn.Err(); err != nil && out.Err == "" {
		out.Err = err.Error()
	}
	closing := time.Now()
	session.Close()
	out.SessionClose = ms(time.Since(closing))
	return out, nil
}

// finish: a turn that ends by itself; the time from its text to the Steps channel closing.
func finish(session *kimi.Session, turn *kimi.Turn, texted, stepsClosed <-chan time.Time) (*result, error) {
	defer session.Close()
	out := &result{Mode: "finish", Engine: signalState(childOf(os.Getpid()))}
	var started time.Time
	select {
	case started = <-texted:
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("no text within 60 s")
	}
	select {
	case at := <-stepsClosed:
		out.StepsClosed = ms(at.Sub(started))
	case <-time.After(60 * time.Second):
		out.StepsClosed = -1
	}
	out.Status = string(turn.Result().Status)
	if err := turn.Err(); err != nil {
		out.Err = err.Error()
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitForSleep finds the `sleep 30` the Shell tool started in `work`.
func waitForSleep(work string, bound time.Duration) (int, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, entry := range entries {
			pid, err := strconv.Atoi(entry.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
			if err != nil || !strings.HasPrefix(string(cmdline), "sleep\x0030") {
				continue
			}
			if cwd, err := os.Readlink(filepath.Join("/proc", entry.Name(), "cwd")); err == nil && cwd == work {
				return pid, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no `sleep 30` in %s within %s", work, bound)
}

// alive: the process exists and is not a zombie (a zombie has ended; only its parent's wait is left).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// childOf returns the first child of `pid` (the SDK's engine: this program starts no other).
func childOf(pid int) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(children)); len(fields) > 0 {
			child, _ := strconv.Atoi(fields[0])
			return child
		}
	}
	return 0
}

func signalState(pid int) procSig {
	state := procSig{PID: pid}
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if value, ok := strings.CutPrefix(line, "SigIgn:\t"); ok {
				state.SigIgn = value
			} else if value, ok := strings.CutPrefix(line, "SigBlk:\t"); ok {
				state.SigBlk = value
			}
		}
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 2 {
			state.PGID, _ = strconv.Atoi(fields[2])
		}
	}
	return state
}
