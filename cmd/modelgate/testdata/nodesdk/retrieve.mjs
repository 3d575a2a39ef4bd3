// Retrieves a model, then creates, retrieves, lists the input items of and
// deletes a stored response with the official Node SDK; a retrieve after
// the delete must throw NotFoundError. Prints what it saw as JSON for
// TestNodeSDKRetrieve, with the x-request-id of every answer.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.MODELGATE_BASE_URL,
  apiKey: process.env.MODELGATE_API_KEY,
  maxRetries: 0,
});
const model = process.argv[2];
const requestIDs = {};
const summary = (r) => ({ id: r.id, status: r.status, text: r.output_text });

const { data: m, request_id: modelsID } = await client.models.retrieve(model).withResponse();
requestIDs['models.retrieve'] = modelsID;

const { data: created, request_id: createID } = await client.responses
  .create({ model, input: 'Hello!', store: true })
  .withResponse();
requestIDs['responses.create'] = createID;

const { data: retrieved, request_id: retrieveID } = await client.responses.retrieve(created.id).withResponse();
requestIDs['responses.retrieve'] = retrieveID;

const { data: page, request_id: listID } = await client.responses.inputItems.list(created.id).withResponse();
requestIDs['responses.inputItems.list'] = listID;

const { request_id: deleteID } = await client.responses.delete(created.id).withResponse();
requestIDs['responses.delete'] = deleteID;

let notFound = null;
try {
  await client.responses.retrieve(created.id);
} catch (err) {
  if (!(err instanceof OpenAI.NotFoundError)) {
    throw err;
  }
  notFound = { status: err.status, name: err.constructor.name, type: err.type, code: err.code };
  requestIDs['retrieve after delete'] = err.requestID;
}
if (notFound === null) {
  throw new Error(`responses.retrieve(${created.id}) after delete did not throw`);
}

process.stdout.write(
  JSON.stringify({
    model: { id: m.id, object: m.object, ownedBy: m.owned_by },
    created: summary(created),
    retrieved: summary(retrieved),
    inputItems: page.data.map((it) => ({
      id: it.id,
      type: it.type,
      role: it.role,
      text: it.content?.[0]?.text,
    })),
    firstID: page.body.first_id,
    lastID: page.body.last_id,
    hasMore: page.has_more,
    notFound,
    requestIDs,
  }),
);
