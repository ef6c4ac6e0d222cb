// agentwatch: refuses a tool call that repeats a loop, before it runs.
// Written by `agentwatch hooks install opencode`; `agentwatch hooks uninstall opencode` removes it.
// Before each tool call it asks `agentwatch hook opencode` (one JSON event on its stdin, at most
// 10 s) and throws the reason when the answer is {"decision":"deny","reason":…}. Anything else
// (no answer, another answer, an error, a timeout) lets the call run.
import { spawn } from "node:child_process";

const AGENTWATCH = "@BINARY@";
const TIMEOUT_MS = 10000;

// What `agentwatch hook opencode` printed, when it ended with 0 in time; else "".
function ask(event) {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn(AGENTWATCH, ["hook", "opencode"], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      resolve("");
      return;
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    child.stdout.on("data", (chunk) => (out += chunk));
    child.on("error", () => {
      clearTimeout(timer);
      resolve("");
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve(code === 0 ? out : "");
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(event));
  });
}

// The reason of a denial, or null.
function denial(answer) {
  try {
    const parsed = JSON.parse(answer);
    const denied = parsed && parsed.decision === "deny" && typeof parsed.reason === "string";
    return denied ? parsed.reason : null;
  } catch {
    return null;
  }
}

export const Agentwatch = async (ctx) => ({
  "tool.execute.before": async (input, output) => {
    const event = {
      hook_event_name: "tool.execute.before",
      session_id: input.sessionID,
      call_id: input.callID,
      tool: input.tool,
      tool_input: output.args,
      cwd: ctx.directory,
    };
    if (ctx.serverUrl) event.server_url = String(ctx.serverUrl);
    const reason = denial(await ask(event));
    if (reason !== null) throw new Error(reason);
  },
});
