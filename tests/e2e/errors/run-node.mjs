// Runs each program of the error corpus in Node, as the body of an async function with the same
// tools the Rust side binds, and prints what each threw: [{ name, message }] (message null when
// the program did not throw). Input on stdin: [{ name, js }], the programs with types erased.
import { readFileSync } from 'node:fs';

class ToolCallError extends Error {
  constructor(message, toolName) {
    super(message);
    this.name = 'ToolCallError';
    this.toolName = toolName;
  }
}

const tools = Object.freeze({
  search: async () => ({ results: [{ title: 'a', score: 1 }, { title: 'b', score: 2 }], total: 2 }),
  get_user: async ({ id }) => ({ id, name: 'Ada' }),
  list_users: async () => [{ name: 'a', profile: { active: true } }, { name: 'b' }],
  read_file: async () => '{bad json',
  fail_always: async () => {
    throw new ToolCallError('failed on purpose', 'fail_always');
  },
});

const silent = { log() {}, info() {}, warn() {}, error() {}, debug() {} };
const AsyncFunction = (async () => {}).constructor;
const programs = JSON.parse(readFileSync(0, 'utf8'));
const out = [];
for (const { name, js } of programs) {
  let message = null;
  try {
    const body = new AsyncFunction('tools', 'ToolCallError', 'console', `'use strict';\n${js}`);
    await body(tools, ToolCallError, silent);
  } catch (e) {
    message = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  out.push({ name, message });
}
process.stdout.write(JSON.stringify(out));
