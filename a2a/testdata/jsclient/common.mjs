// What the client scripts share: the card URL from the command line, and a user message.
import { randomUUID } from 'node:crypto';

// cardURLArg returns the agent card URL given as the first argument, or exits with
// usage naming script.
export function cardURLArg(script) {
  const url = process.argv[2];
  if (!url) {
    console.error(`usage: node ${script} <agent card URL>`);
    process.exit(2);
  }
  return url;
}

// message is an A2A 0.3 user message holding one text part.
export const message = (text) => ({
  kind: 'message',
  messageId: randomUUID(),
  role: 'user',
  parts: [{ kind: 'text', text }],
});
