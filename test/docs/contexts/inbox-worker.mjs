// context: an ES module holding the `inbox` of docs/inbox.md (any engine's; here MemoryInbox) and
// your code (`reply`, `callTheModel`), with nothing else imported; it stops the fragment's
// `worker` and exits.
// runs as: script
import * as core from 'svc-webhooks'

const inbox = new core.MemoryInbox()
const reply = async (conversationId, text) => console.log('reply to', conversationId, text)
const callTheModel = async (event) => console.log('model for', event.message.id)
void reply, callTheModel
/* fragment */
await worker.stop()
process.exit(0)
