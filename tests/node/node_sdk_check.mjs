// Drives `soulwire --wire` through the public API of the published Node SDK
// (@moonshot-ai/kimi-agent-sdk), one scenario per run: `node node_sdk_check.mjs SCENARIO`.
// Environment: SOULWIRE_EXECUTABLE (the engine), WORK_DIR, KIMI_SHARE_DIR (holds config.toml),
// SCRIPTS_FILE (the scripted model's replies; each engine process reads it when it starts).
// Prints one JSON line with what it observed; assertion failures exit non-zero.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { z } from "zod";
import {
  ProtocolClient,
  createExternalTool,
  createSession,
  listSessions,
  parseSessionEvents,
  prompt,
} from "@moonshot-ai/kimi-agent-sdk";

const executable = process.env.SOULWIRE_EXECUTABLE;
const workDir = process.env.WORK_DIR;
assert.ok(executable && workDir, "SOULWIRE_EXECUTABLE and WORK_DIR must be set");

const base = { workDir, executable, thinking: false };

function texts(events) {
  return events
    .filter((e) => e.type === "ContentPart" && e.payload.type === "text")
    .map((e) => e.payload.text)
    .join("");
}

async function collect(turn, onEvent) {
  const events = [];
  for await (const event of turn) {
    events.push(event);
    if (onEvent) await onEvent(event);
  }
  return { events, result: await turn.result };
}

const scenarios = {
  // A budget the engine's config sets (tree: 1,000 tokens). The SDK does not declare
  // `supports_budget`, so the stop reaches it as the `cancelled` end it already handles, with
  // no budget events; `/budget` (a prompt) raises the limit and the session goes on.
  async budget() {
    const session = createSession(base);
    try {
      const first = await collect(session.prompt("first"));
      assert.equal(first.result.status, "finished");
      const stopped = await collect(session.prompt("second"));
      assert.equal(stopped.result.status, "cancelled");
      const types = stopped.events.map((e) => e.type);
      assert.ok(!types.includes("StepBegin"), `no model call was made: ${types}`);
      assert.ok(!types.some((t) => t.startsWith("Budget")), `no budget events: ${types}`);
      const raised = await collect(session.prompt("/budget tree tokens 100000"));
      assert.equal(raised.result.status, "finished");
      assert.match(texts(raised.events), /100000|100,000/);
      const goOn = await collect(session.prompt("continue"));
      assert.equal(goOn.result.status, "finished");
      assert.equal(texts(goOn.events), "continued");
      return { status: goOn.result.status, stopped: stopped.result.status };
    } finally {
      await session.close();
    }
  },

  // Each limit at each scope (tests/budget_cases.py; BUDGET_CASE names the limit kind, its
  // value and the raised one): set with `/budget` in a session per scope, the limit stops the
  // prompt after its first command (`cancelled`: this SDK knows no budgets), `/budget` shows
  // what the scope spent and raises it, and "continue" goes on.
  async budget_limits() {
    const { kind, command, limit, raised, scopes } = JSON.parse(process.env.BUDGET_CASE);
    const results = (events) =>
      Object.fromEntries(
        events.filter((e) => e.type === "ToolResult").map((e) => [e.payload.tool_call_id, e.payload.return_value]),
      );
    const seen = {};
    for (const scope of scopes) {
      const session = createSession({ ...base, yoloMode: true });
      try {
        const set = await collect(session.prompt(`/budget ${scope} ${command} ${limit}`));
        assert.equal(set.result.status, "finished");
        const stopped = await collect(session.prompt("go"));
        assert.equal(stopped.result.status, "cancelled", `${scope}: ${JSON.stringify(stopped.result)}`);
        const ran = results(stopped.events);
        assert.equal(ran.c1.is_error, false, `${scope}: the first command ran`);
        if (kind === "tool_calls") assert.match(ran.c2.message, /^Not run: the \w+ budget's tool_calls limit/);
        else assert.equal(ran.c2, undefined, `${scope}: no second call was made`);
        const up = await collect(session.prompt(`/budget ${scope} ${command} ${raised}`));
        const line = texts(up.events).split("\n").find((l) => l.trim().startsWith(`${scope} ${kind}:`));
        assert.ok(line, `${scope}: /budget shows the limit: ${texts(up.events)}`);
        seen[scope] = line.trim();
        const goOn = await collect(session.prompt("continue"));
        assert.equal(goOn.result.status, "finished");
        assert.ok(texts(goOn.events).endsWith("continued"), texts(goOn.events));
        if (kind !== "tool_calls") assert.equal(results(goOn.events).c2.is_error, false);
      } finally {
        await session.close();
      }
    }
    return { status: "finished", seen };
  },

  async streaming() {
    const session = createSession({ ...base, thinking: true });
    try {
      const { events, result } = await collect(session.prompt("hi"));
      assert.equal(result.status, "finished");
      assert.equal(texts(events), "Hello world");
      const thinking = events.filter((e) => e.type === "ContentPart" && e.payload.type === "think");
      assert.deepEqual(thinking.map((e) => e.payload.think), ["let me think"]);
      const types = events.map((e) => e.type);
      assert.equal(types[0], "TurnBegin");
      assert.ok(types.includes("StepBegin") && types.includes("StatusUpdate"));
      const status = events.find((e) => e.type === "StatusUpdate");
      assert.equal(status.payload.token_usage.output, 20);
      assert.ok(session.slashCommands.some((c) => c.name === "clear"));
      return { status: result.status, types };
    } finally {
      await session.close();
    }
  },

  async approvals() {
    const session = createSession(base);
    try {
      const seen = [];
      const turn = session.prompt("run the commands");
      const { events, result } = await collect(turn, async (event) => {
        if (event.type === "ApprovalRequest") {
          seen.push(event.payload.description);
          const answer = seen.length === 1 ? "approve" : "reject";
          await turn.approve(event.payload.id, answer);
        }
      });
      const results = events.filter((e) => e.type === "ToolResult").map((e) => e.payload);
      assert.equal(result.status, "finished");
      assert.equal(seen.length, 2);
      assert.equal(results[0].return_value.is_error, false);
      assert.match(String(results[0].return_value.output), /approved/);
      assert.equal(results[1].return_value.is_error, true);
      return { status: result.status, approvals: seen };
    } finally {
      await session.close();
    }
  },

  async external_tool() {
    const calls = [];
    const openFile = createExternalTool({
      name: "open_file",
      description: "Open a file in the editor",
      parameters: z.object({ path: z.string().describe("the file"), line: z.number().optional() }),
      handler: async (params) => {
        calls.push(params);
        return { output: `opened ${params.path}`, message: "Opened" };
      },
    });
    const session = createSession({ ...base, externalTools: [openFile] });
    try {
      const { events, result } = await collect(session.prompt("open a.py"));
      assert.equal(result.status, "finished");
      assert.deepEqual(calls, [{ path: "a.py", line: 3 }]);
      const toolResult = events.find((e) => e.type === "ToolResult").payload;
      assert.equal(toolResult.return_value.is_error, false);
      assert.equal(toolResult.return_value.output, "opened a.py");
      assert.equal(texts(events), "done");
      return { status: result.status, calls };
    } finally {
      await session.close();
    }
  },

  async cancel_then_prompt() {
    let release;
    const released = new Promise((resolve) => {
      release = resolve;
    });
    const waitTool = createExternalTool({
      name: "wait_forever",
      description: "Blocks until released",
      parameters: z.object({}),
      handler: async () => {
        await released;
        return { output: "late", message: "" };
      },
    });
    const session = createSession({ ...base, externalTools: [waitTool] });
    try {
      const turn = session.prompt("start something long");
      const first = await collect(turn, async (event) => {
        if (event.type === "ToolCall") await turn.interrupt();
      });
      release();
      assert.equal(first.result.status, "cancelled");
      const second = await collect(session.prompt("and now?"));
      assert.equal(second.result.status, "finished");
      assert.equal(texts(second.events), "second turn");
      return { first: first.result.status, second: second.result.status };
    } finally {
      release();
      await session.close();
    }
  },

  async resume() {
    const sessionId = randomUUID();
    const one = createSession({ ...base, sessionId });
    try {
      const { result } = await collect(one.prompt("remember 42"));
      assert.equal(result.status, "finished");
    } finally {
      await one.close();
    }
    // a new engine process reads the scripted replies afresh
    writeFileSync(process.env.SCRIPTS_FILE, JSON.stringify(["text: it was 42"]));
    const two = createSession({ ...base, sessionId });
    try {
      const { events, result } = await collect(two.prompt("what was it?"));
      assert.equal(result.status, "finished");
      assert.equal(texts(events), "it was 42");
    } finally {
      await two.close();
    }
    const listed = await listSessions(workDir);
    assert.ok(listed.some((s) => s.id === sessionId), "the session is listed from the share dir");
    const history = await parseSessionEvents(workDir, sessionId);
    const inputs = history.filter((e) => e.type === "TurnBegin").map((e) => e.payload.user_input);
    assert.deepEqual(inputs, ["remember 42", "what was it?"]);
    return { sessionId, inputs };
  },

  async steer() {
    // The external tool steers the turn that called it: the steer lands during a running tool.
    let turn;
    const waitTool = createExternalTool({
      name: "wait_here",
      description: "Steers the running turn, then returns",
      parameters: z.object({}),
      handler: async () => {
        await turn.steer("also use python");
        return { output: "waited", message: "" };
      },
    });
    const session = createSession({ ...base, externalTools: [waitTool] });
    try {
      turn = session.prompt("start");
      const { events, result } = await collect(turn);
      assert.equal(result.status, "finished");
      const steers = events.filter((e) => e.type === "SteerInput");
      assert.deepEqual(steers.map((e) => e.payload.user_input), ["also use python"]);
      const types = events.map((e) => e.type);
      assert.ok(types.indexOf("SteerInput") > types.indexOf("ToolResult"));
      assert.equal(types.filter((t) => t === "StepBegin").length, 2);
      assert.equal(texts(events), "steered reply");
      return { status: result.status, steers: steers.length };
    } finally {
      await session.close();
    }
  },

  async plan_mode() {
    // setPlanMode before and after a turn; then the model writes the plan file and presents it
    // with ExitPlanMode, and the application approves it through respondQuestion.
    const sessionId = randomUUID();
    const planFile = `${process.env.KIMI_SHARE_DIR}/plans/${sessionId}.md`;
    const write = { path: planFile, content: "1. plan\n" };
    writeFileSync(
      process.env.SCRIPTS_FILE,
      JSON.stringify([
        "text: warming up",
        `tool_call: ${JSON.stringify({ id: "w1", name: "WriteFile", arguments: JSON.stringify(write) })}`,
        `tool_call: ${JSON.stringify({ id: "x1", name: "ExitPlanMode", arguments: "{}" })}`,
        "text: carrying it out",
      ]),
    );
    const session = createSession({ ...base, sessionId });
    try {
      const first = await collect(session.prompt("hi"));
      assert.equal(first.result.status, "finished");
      assert.equal(await session.setPlanMode(true), true);
      assert.equal(session.planMode, true);
      const questions = [];
      const turn = session.prompt("plan it");
      const { events, result } = await collect(turn, async (event) => {
        if (event.type === "QuestionRequest") {
          questions.push(event.payload);
          const q = event.payload.questions[0];
          await turn.respondQuestion(event.payload.id, event.payload.id, { [q.question]: "Approve" });
        }
      });
      assert.equal(result.status, "finished");
      assert.equal(questions.length, 1);
      assert.deepEqual(
        questions[0].questions[0].options.map((o) => o.label),
        ["Approve", "Reject", "Reject and Exit"],
      );
      const modes = events.filter((e) => e.type === "StatusUpdate").map((e) => e.payload.plan_mode);
      assert.deepEqual(modes, [true, true, false, false]);
      assert.equal(texts(events), "carrying it out");
      assert.equal(await session.setPlanMode(false), false);
      return { status: result.status, modes };
    } finally {
      await session.close();
    }
  },

  async question() {
    const session = createSession(base);
    try {
      const turn = session.prompt("ask me");
      const asked = [];
      const { events, result } = await collect(turn, async (event) => {
        if (event.type === "QuestionRequest") {
          asked.push(event.payload.questions.map((q) => q.question));
          await turn.respondQuestion(event.payload.id, event.payload.id, {
            "Which colours?": "red, blue",
            "Ship it?": "Yes",
          });
        }
      });
      assert.equal(result.status, "finished");
      assert.deepEqual(asked, [["Which colours?", "Ship it?"]]);
      const toolResult = events.find((e) => e.type === "ToolResult").payload.return_value;
      assert.equal(toolResult.is_error, false);
      assert.deepEqual(JSON.parse(toolResult.output), {
        answers: { "Which colours?": "red, blue", "Ship it?": "Yes" },
      });
      return { status: result.status, asked };
    } finally {
      await session.close();
    }
  },

  async hooks() {
    // Hook subscriptions are a ProtocolClient feature of this SDK version.
    const client = new ProtocolClient();
    const seen = [];
    try {
      const init = await client.start({
        workDir,
        executablePath: executable,
        yoloMode: true,
        hooks: [
          {
            id: "guard",
            event: "PreToolUse",
            matcher: "^Shell$",
            handler: async (request) => {
              seen.push(request.input_data.tool_input.command);
              return { action: "block", reason: "not on my watch" };
            },
          },
        ],
      });
      assert.equal(init.hooks.configured.PreToolUse, 1);
      assert.ok(init.hooks.supported_events.includes("Stop"));
      const stream = client.sendPrompt("run it");
      const events = [];
      for await (const event of stream.events) events.push(event);
      const result = await stream.result;
      assert.equal(result.status, "finished");
      assert.deepEqual(seen, ["echo hi"]);
      const toolResult = events.find((e) => e.type === "ToolResult").payload.return_value;
      assert.equal(toolResult.message, "not on my watch");
      const resolved = events.find((e) => e.type === "HookResolved").payload;
      assert.equal(resolved.action, "block");
      return { status: result.status, seen };
    } finally {
      await client.stop();
    }
  },

  async one_shot() {
    const { result, events } = await prompt("hi", base);
    assert.equal(result.status, "finished");
    assert.equal(texts(events), "one shot answer");
    return { status: result.status };
  },
};

const name = process.argv[2];
const scenario = scenarios[name];
if (!scenario) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
const outcome = await scenario();
console.log(JSON.stringify({ scenario: name, ...outcome }));
