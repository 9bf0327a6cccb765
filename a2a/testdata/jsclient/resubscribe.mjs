// Resubscribes to a task with the official A2A JS SDK (protocol 0.3, JSON-RPC) and prints
// the events it gets as one JSON array on stdout. Usage: node resubscribe.mjs <agent card URL> <task id>
import { ClientFactory } from '@a2a-js/sdk/client';

const [cardURL, taskId] = process.argv.slice(2);
if (!cardURL || !taskId) {
  console.error('usage: node resubscribe.mjs <agent card URL> <task id>');
  process.exit(2);
}

const client = await new ClientFactory().createFromUrl(cardURL, '');
const events = [];
for await (const event of client.resubscribeTask({ id: taskId })) {
  events.push(event);
}
console.log(JSON.stringify(events));
