// context: inbox-worker.mjs with `createInboxWorker` imported, as a page's earlier fragment did;
// it stops the fragment's `worker` and exits.
// runs as: script
import { createInboxWorker, MemoryInbox } from 'svc-webhooks'

const inbox = new MemoryInbox()
const callTheModel = async (event) => console.log('model for', event.message.id)
void createInboxWorker, callTheModel
/* fragment */
await worker.stop()
process.exit(0)
