/**
 * Realistic deliveries for the benchmarks: `message.received` payloads serialized as the service
 * does (sorted keys, no whitespace, UTF-8), padded to a target size with conversation text that
 * mixes ASCII, accented Latin and emoji, as real chat messages do.
 */
import { sampleEvent, serializeEvent } from 'svc-webhooks/testing'

const encoder = new TextEncoder()
const PHRASES = [
  'Hola, ¿tienen mesa para dos a las 20:00? ',
  'Perfect, see you tonight! ',
  'Can I change the booking to 21:30 instead? ',
  'Merci beaucoup, à bientôt ',
  '🍝🍷 ',
  'Do you have gluten-free options on the menu? ',
]

/**
 * A `message.received` event whose serialized body is exactly `size` bytes (within one byte of
 * a multi-byte character: padded with ASCII spaces to land on the size), with a given message id.
 */
export function paddedEvent(size, index = 0) {
  const event = sampleEvent('message.received')
  event.message.id = `c4d5e6f7-a8b9-4c0d-9e1f-${String(index).padStart(12, '0')}`
  const base = encoder.encode(serializeEvent(event)).byteLength
  let text = event.message.text
  let extra = size - base
  for (let i = 0; extra > 0; i++) {
    const phrase = PHRASES[i % PHRASES.length]
    const cost = encoder.encode(phrase).byteLength
    if (cost > extra) {
      text += ' '.repeat(extra)
      break
    }
    text += phrase
    extra -= cost
  }
  event.message.text = text
  const body = serializeEvent(event)
  const bytes = encoder.encode(body).byteLength
  if (bytes !== size) throw new Error(`bench: built a ${bytes}-byte body for a ${size}-byte target`)
  return event
}
