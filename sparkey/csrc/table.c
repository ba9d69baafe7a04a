/* The slot table of an index: the probe of a lookup and the sequential Robin Hood build.
 *
 * A slot is hash then address (little-endian, hash_size and address_size bytes); address 0
 * marks an empty slot. An occupant's home is hash % capacity and its displacement
 * (slot - home) mod capacity.
 *
 * The probe is HashIndex.get's: from the home slot, stop at an empty slot, at an occupant less
 * displaced than the probe (the key would have displaced it), or after probe_limit, so a lookup
 * reads at most probe_limit + 1 <= capacity slots even in a corrupt file. The header's
 * max_displacement is not the limit: a damaged one would hide present keys.
 *
 * The build is sparkey.robinhood.replay (its docstring has the rules and a worked example):
 * PUTs are inserted with Robin Hood swaps (sparkey-java also swaps on equal displacement when
 * the new address is smaller), an equal key overwrites in place, a DELETE removes its key and
 * shifts the following occupants back. Insertion and removal walks are bounded by the
 * capacity, so more entries than slots fail instead of looping.
 */
#include "native.h"

/* ---- lookups */

static inline uint64_t displacement_of(uint64_t slot, uint64_t home, uint64_t capacity)
{
    return slot >= home ? slot - home : slot + capacity - home;
}

void sparkey_probe_start(const sparkey_table *table, sparkey_probe *probe, uint64_t hash)
{
    probe->hash = hash;
    probe->slot = sparkey_home(hash, table->capacity, table->home_multiplier);
    probe->displacement = 0;
    probe->finished = 0;
}

int sparkey_probe_next(const sparkey_table *table, sparkey_probe *probe, uint64_t *address)
{
    /* the probe's state in locals for the loop: the slot reads cannot alias it */
    unsigned hash_size = table->hash_size, address_size = table->address_size;
    uint64_t capacity = table->capacity, hash = probe->hash;
    uint64_t slot = probe->slot, displacement = probe->displacement;
    const uint8_t *at = table->slots + slot * (hash_size + address_size);
    int finished = probe->finished, found = 0;
    while (!finished && !found) {
        uint64_t other_hash = load_le(at, hash_size);
        uint64_t other_address = load_le(at + hash_size, address_size);
        if (!other_address) {
            finished = 1;
            break;
        }
        /* an occupant with the probe's hash shares its home, hence its displacement (which
         * stays at most probe_limit, below capacity): no remainder needed to compare them */
        found = other_hash == hash;
        if (displacement >= table->probe_limit
                || (!found && displacement > displacement_of(
                        slot, sparkey_home(other_hash, capacity, table->home_multiplier),
                        capacity))) {
            finished = 1;
        } else {
            displacement++;
            at += hash_size + address_size;
            if (++slot == capacity) {
                slot = 0;
                at = table->slots;
            }
        }
        if (found)
            *address = other_address;
    }
    probe->slot = slot;
    probe->displacement = displacement;
    probe->finished = finished;
    return found;
}

/* ---- the sequential build */

typedef struct {
    uint8_t *slots;
    size_t *slot_entry;         /* entry number held by each slot; NULL when keys are distinct */
    uint64_t capacity, home_multiplier;
    unsigned hash_size, address_size, slot_size;
    const sparkey_entries *entries;
    int java;
} builder;

static inline uint64_t home_of(const builder *b, uint64_t hash)
{
    return sparkey_home(hash, b->capacity, b->home_multiplier);
}

enum { PLACED = 0, TABLE_FULL = -2 };

static inline uint64_t slot_hash(const builder *b, uint64_t slot)
{
    return load_le(b->slots + slot * b->slot_size, b->hash_size);
}

static inline uint64_t slot_address(const builder *b, uint64_t slot)
{
    return load_le(b->slots + slot * b->slot_size + b->hash_size, b->address_size);
}

static inline void store_slot(builder *b, uint64_t slot, uint64_t hash, uint64_t address,
                              size_t entry)
{
    uint8_t *at = b->slots + slot * b->slot_size;
    store_le(at, b->hash_size, hash);
    store_le(at + b->hash_size, b->address_size, address);
    if (b->slot_entry)
        b->slot_entry[slot] = entry;
}

static int same_key(const builder *b, size_t one, size_t other)
{
    const sparkey_entries *e = b->entries;
    return e->key_lengths[one] == e->key_lengths[other]
        && memcmp(e->keys + e->key_offsets[one], e->keys + e->key_offsets[other],
                  (size_t)e->key_lengths[one]) == 0;
}

static uint64_t put_garbage(const builder *b, size_t entry)
{
    const sparkey_entries *e = b->entries;
    return sparkey_put_size((uint64_t)e->key_lengths[entry], (uint64_t)e->value_lengths[entry]);
}

/* robinhood._insert: place one PUT; add the size of an overwritten PUT to *garbage. */
static int insert(builder *b, size_t entry, uint64_t *garbage)
{
    uint64_t hash = b->entries->hashes[entry], address = b->entries->addresses[entry];
    uint64_t capacity = b->capacity, slot = home_of(b, hash), displacement = 0;
    int original = 1;
    for (uint64_t steps = 0; steps <= capacity; steps++) {
        uint64_t other_address = slot_address(b, slot);
        if (!other_address) {
            store_slot(b, slot, hash, address, entry);
            return PLACED;
        }
        uint64_t other_hash = slot_hash(b, slot);
        size_t other_entry = b->slot_entry ? b->slot_entry[slot] : 0;
        if (original && b->slot_entry && other_hash == hash && same_key(b, other_entry, entry)) {
            store_slot(b, slot, hash, address, entry);
            *garbage += put_garbage(b, other_entry);
            return PLACED;
        }
        uint64_t other_displacement = displacement_of(slot, home_of(b, other_hash), capacity);
        if (displacement > other_displacement || (b->java && displacement == other_displacement
                                                   && address < other_address)) {
            store_slot(b, slot, hash, address, entry);
            hash = other_hash;
            address = other_address;
            entry = other_entry;
            displacement = other_displacement;
            original = 0;
        }
        displacement++;
        if (++slot == capacity)
            slot = 0;
    }
    return TABLE_FULL;
}

/* robinhood._remove: apply one DELETE (with keys); add the size of the removed PUT. */
static int remove_key(builder *b, size_t entry, uint64_t *garbage)
{
    uint64_t hash = b->entries->hashes[entry], capacity = b->capacity;
    uint64_t slot = home_of(b, hash), displacement = 0;
    for (; displacement <= capacity; displacement++) {
        if (!slot_address(b, slot))
            return PLACED;
        uint64_t other_hash = slot_hash(b, slot);
        size_t other_entry = b->slot_entry[slot];
        if (other_hash == hash && same_key(b, other_entry, entry)) {
            for (uint64_t shifted = 0;; shifted++) {
                uint64_t following = slot + 1 < capacity ? slot + 1 : 0;
                uint64_t following_hash = slot_hash(b, following);
                if (!slot_address(b, following) || home_of(b, following_hash) == following)
                    break;
                if (shifted == capacity)
                    return TABLE_FULL;
                store_slot(b, slot, following_hash, slot_address(b, following),
                           b->slot_entry[following]);
                slot = following;
            }
            memset(b->slots + slot * b->slot_size, 0, b->slot_size);
            *garbage += put_garbage(b, other_entry);
            return PLACED;
        }
        if (displacement > displacement_of(slot, home_of(b, other_hash), capacity))
            return PLACED;
        if (++slot == capacity)
            slot = 0;
    }
    return PLACED;
}

int sparkey_fill_slots(uint8_t *slots, uint64_t capacity, unsigned hash_size,
                       unsigned address_size, const sparkey_entries *entries, int java,
                       uint64_t *garbage)
{
    builder b = {slots, NULL, capacity, sparkey_home_multiplier(capacity, hash_size), hash_size,
                 address_size, hash_size + address_size, entries, java};
    if (entries->keys) {
        b.slot_entry = PyMem_RawMalloc(capacity * sizeof(size_t));
        if (!b.slot_entry)
            return -1;
    }
    memset(slots, 0, capacity * b.slot_size);
    *garbage = 0;
    int status = PLACED;
    for (size_t i = 0; i < entries->count && status == PLACED; i++) {
        if (!entries->keys || entries->kinds[i] == SPARKEY_KIND_PUT) {
            status = insert(&b, i, garbage);
        } else {
            if (!java)  /* libsparkey also counts the DELETE entry itself */
                *garbage += sparkey_delete_size((uint64_t)entries->key_lengths[i]);
            status = remove_key(&b, i, garbage);
        }
    }
    PyMem_RawFree(b.slot_entry);
    return status;
}
