import sys

from torchlint.verify import main

sys.exit(main())
