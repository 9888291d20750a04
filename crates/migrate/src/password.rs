//! The password Apache ZooKeeper gives a session. It is not stored: the
//! server derives it from the session id whenever a client reconnects
//! (`ZooKeeperServer.generatePasswd`: `java.util.Random` seeded with the id
//! xor a fixed secret, 16 bytes from `nextBytes`). An imported session
//! keeps the password its clients already hold.

/// `ZooKeeperServer.superSecret`.
const SUPER_SECRET: i64 = 0xB341_5C00;
/// ZooKeeper's session passwords are 16 bytes.
const PASSWORD_BYTES: usize = 16;

/// The password ZooKeeper expects from a client of session `id`.
pub fn zookeeper_password(id: i64) -> Vec<u8> {
    let mut random = JavaRandom::new(id ^ SUPER_SECRET);
    let mut password = vec![0u8; PASSWORD_BYTES];
    random.next_bytes(&mut password);
    password
}

/// `java.util.Random`: a 48-bit linear congruential generator, specified
/// exactly by its Javadoc.
struct JavaRandom {
    seed: u64,
}

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const ADDEND: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;

    fn new(seed: i64) -> Self {
        Self {
            seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    fn next_int(&mut self) -> i32 {
        self.seed = (self
            .seed
            .wrapping_mul(Self::MULTIPLIER)
            .wrapping_add(Self::ADDEND))
            & Self::MASK;
        (self.seed >> 16) as i32
    }

    /// `nextBytes`: each int fills up to four bytes, low byte first.
    fn next_bytes(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(4) {
            let mut random = self.next_int();
            for byte in chunk {
                *byte = random as u8;
                random >>= 8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_random_matches_the_jdk() {
        // new java.util.Random(42).nextInt() three times, from a JDK.
        let mut random = JavaRandom::new(42);
        assert_eq!(random.next_int(), -1170105035);
        assert_eq!(random.next_int(), 234785527);
        assert_eq!(random.next_int(), -1360544799);
    }
}
