// The OpenAI Agents SDK as a client of modelgate dev, for cmd/modelgate's
// TestAgentsSDK: on the model argv[2], a two-step tool loop with reasoning
// on (the secret stored under argv[3]), then a structured output with
// tools (under argv[4]). Prints one JSON line per run.
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

const [model, loopName, structuredName] = process.argv.slice(2);
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: process.env.MODELGATE_BASE_URL, apiKey: process.env.MODELGATE_API_KEY, maxRetries: 0 }));

const calls = [];
const getSecret = tool({
  name: 'get_secret',
  description: 'Look up the secret stored under a name.',
  parameters: z.object({ name: z.string() }),
  execute: async ({ name }) => { calls.push(name); return `secret-of-${name}`; },
});

const loop = await run(new Agent({ name: 'looper', model, tools: [getSecret], modelSettings: { reasoning: { effort: 'medium' } } }),
  `What is the secret stored under \`${loopName}\`?`);
console.log(JSON.stringify({ run: 'loop', calls: [...calls], output: loop.finalOutput }));

calls.length = 0;
const structured = await run(new Agent({ name: 'structured', model, tools: [getSecret], outputType: z.object({ secret: z.string() }) }),
  `What is the secret stored under \`${structuredName}\`? Answer as JSON.`);
console.log(JSON.stringify({ run: 'structured', calls: [...calls], output: structured.finalOutput }));
