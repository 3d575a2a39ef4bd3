// Asks modelgate for embeddings with the official Node SDK, which requests
// base64 by default and decodes it to float32 arrays. Prints the vectors
// by model as JSON for TestNodeSDKBase64Embeddings.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.MODELGATE_BASE_URL,
  apiKey: process.env.MODELGATE_API_KEY,
  maxRetries: 0,
});
const input = process.env.MODELGATE_INPUT;
const out = {};
for (const model of process.argv.slice(2)) {
  const res = await client.embeddings.create({ model, input });
  out[model] = res.data.map((d) => Array.from(d.embedding));
}
process.stdout.write(JSON.stringify(out));
