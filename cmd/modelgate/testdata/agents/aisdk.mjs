// The Vercel AI SDK as a client of modelgate dev, for cmd/modelgate's
// TestAISDK: on the model argv[2], through argv[3] (responses-store: the
// Responses API as the SDK calls it by default, storing responses;
// responses-stateless: store false; chat: chat completions), a streamed
// two-step tool loop with reasoning on (the secret stored under argv[4]),
// then a structured output with tools (under argv[5]). Prints one JSON
// line per run.
import { generateText, streamText, tool, stepCountIs, Output } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const [model, api, loopName, structuredName] = process.argv.slice(2);
const provider = createOpenAI({ baseURL: process.env.MODELGATE_BASE_URL, apiKey: process.env.MODELGATE_API_KEY });
const lm = api === 'chat' ? provider.chat(model) : provider.responses(model);
// forceReasoning: the SDK knows OpenAI's reasoning models by name only.
const openai = { reasoningEffort: 'medium', forceReasoning: true, store: api !== 'responses-stateless' };

const calls = [];
const tools = {
  get_secret: tool({
    description: 'Look up the secret stored under a name.',
    inputSchema: z.object({ name: z.string() }),
    execute: async ({ name }) => { calls.push(name); return `secret-of-${name}`; },
  }),
};

const loop = streamText({ model: lm, tools, stopWhen: stepCountIs(4), maxRetries: 0, providerOptions: { openai },
  prompt: `What is the secret stored under \`${loopName}\`?` });
const text = await loop.text;
console.log(JSON.stringify({ run: 'loop', calls: [...calls], output: text }));

calls.length = 0;
const structured = await generateText({ model: lm, tools, stopWhen: stepCountIs(4), maxRetries: 0,
  output: Output.object({ schema: z.object({ secret: z.string() }) }),
  prompt: `What is the secret stored under \`${structuredName}\`? Answer as JSON.` });
console.log(JSON.stringify({ run: 'structured', calls: [...calls], output: structured.output }));
